"""reme: reproduce and extend ReMe (dynamic procedural memory for LLM agents)."""

__version__ = "0.1.0"
