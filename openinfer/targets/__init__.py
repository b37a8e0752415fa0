"""Targets: what turns a lowered, planned program into source for one family of devices.

base.py       the declared `Target` interface and `target_for(device)`, the registry of wings
isa.py        the ISA table: every CPU instruction-set fact, stated once
devices.py    device descriptors: load, validate (devices/schema.json), probe this machine
geometry.py   index and shape arithmetic every target's kernels share
env.py        the jinja2 environment of templates/
c/ x86/ vulkan/   the wings (docs/contributing.md: how to add one)
"""
