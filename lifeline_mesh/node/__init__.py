"""The composition root (``root.py``) and what only it uses: transport security, WAL trimming."""
