"""Scripts that run inside a tool's own venv (scripts/tool_env.py), never in the product's environment.

Each file names its venv in a ``# tool venv: <name>`` line; tests/unit/test_test_imports.py holds them to it.
"""
