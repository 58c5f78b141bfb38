"""The bundled cluster files (``sim-60gpu``, ``aws-5node``, ...), shipped as package data so a
name like ``--cluster sim-60gpu`` resolves in an installed copy as in a checkout."""
