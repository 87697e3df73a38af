"""Turn finished run records into the paper's tables, statistics and figures.

Everything here is a pure function over pandas DataFrames (units, runs, pool series), so
reports are reproducible from the records alone and the CLI only has to load and call them.
"""
