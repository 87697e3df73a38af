"""reme: reproduce and extend ReMe (dynamic procedural memory for LLM agents)."""

__version__ = "0.1.0"
# The program's name (the command, the trackers' default project). The paper's method shares
# it; a method's name belongs to its plug-in (methods/<name>/), the program's to here.
PROGRAM = "reme"
