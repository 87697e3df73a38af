"""``memory=langmem_prompt``: LangMem's procedural-memory prompt optimizer (see
``method.py``). Not the paper's LangMem row: the ReMe authors reproduced LangMem with its
episodic-memory guide (``memory=langmem_prompt``). Kept as a separate method for comparison; it
shares the LangChain chat-model adapter with ``memory=langmem_prompt``. Nothing here imports
LangMem at import time (an optional extra: ``bash scripts/install.sh --baselines``)."""
