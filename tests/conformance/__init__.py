"""Registry-generated conformance cases and their independent oracle (see cases.py)."""
