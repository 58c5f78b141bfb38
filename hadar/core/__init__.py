"""The ground floor every other package builds on: errors, file I/O and input validation, safe
names, the SQLite state helper, optional-extra checks, the GPU catalogue, the cluster and job
model (value objects), the cluster file loader, the physical workload catalogue and the
checkpoint integrity format.

``hadar.core`` imports nothing else from the project (an import-linter contract in
``pyproject.toml`` enforces it; see CONTRIBUTING.md, "Dependency rules").
"""
