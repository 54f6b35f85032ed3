"""Files people upload (docs/files.md): what a file is, told by its content (kinds.py), its
text, read once at upload (texts.py), and the files kept per owner, within their limits
(store.py)."""
