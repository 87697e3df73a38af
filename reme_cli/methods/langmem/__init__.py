"""The LangMem baseline (``memory=langmem``): see ``method.py``. Nothing here imports
LangMem at import time; it is an optional extra (``bash scripts/install.sh --baselines`` from the checkout)."""
