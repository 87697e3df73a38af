"""The LangMem baselines: ``memory=langmem`` (the paper's row: episodic memory with storage,
``method.py``) and ``memory=langmem_prompt`` (LangMem's prompt optimizer, ``prompt/``), one
plug-in because they share the LangChain chat-model adapter and the trajectory rendering.
Nothing here imports LangMem at import time; it is an optional extra
(``bash scripts/install.sh --baselines`` from the checkout)."""
