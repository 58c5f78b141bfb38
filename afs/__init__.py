"""AFS (elastic sharing for average JCT): the share computation (``share``) and the ``afs``,
``afs-p`` and ``afs-het`` policies. docs/afs.md."""
