"""Private helpers shared by skrank's subpackages: labels, memory budgets, parameters, deprecation.

Nothing here is public API; the modules are private (``_labels``, ``_memory``, ...). Every
subpackage may import from here; nothing here imports from another skrank subpackage.
"""
