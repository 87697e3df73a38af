"""`reme view`: what memory did, in the browser (runs, suites, units, memory states, health).

    runs.py      the runs under the given directories, re-read when their files change
    overview.py  Overview rows (scores with intervals, fidelity notes) and each run's units
    unit.py      one unit in full, its retrieved items resolved
    memory.py    start state, streams along their commits, items' lives (Memory.describe)
    health.py    the production panel: utility, confidence, additions/deletions, hits, latency
    api.py       what the page asks for, by key
    page.py      the page (static/: HTML, CSS, vanilla JS; nothing from a CDN)
    server.py    live: a read-only JSON API on the standard library's HTTP server
    export.py    one self-contained HTML file
"""
