"""`openinfer devices ...`: list, show and probe device descriptors."""

from __future__ import annotations

import json
from pathlib import Path

from ..cross import cross_file_text
from ..errors import OpenInferError
from ..files import check_output_path, write_text
from ..targets.base import target_for
from ..targets.devices import bundled, probe_cpu, probe_vulkan
from ..targets.devices import load as load_device


def register(sub) -> None:
    d = sub.add_parser("devices", help="list, show or probe device descriptors",
                       description="Device descriptors (JSON, schema: devices/schema.json) pick the target.")
    dsub = d.add_subparsers(dest="devices_command", metavar="COMMAND")
    d.set_defaults(help_parser=d)
    lst = dsub.add_parser("list", help="list the bundled descriptors",
                          description="List the device descriptors shipped with OpenInfer (devices/*.json): name, "
                                      "target (c/<isa> or vulkan) and description. Pass a name to --arch.")
    lst.set_defaults(handler=devices_list)
    show = dsub.add_parser("show", help="validate and print a descriptor",
                           description="Validate a descriptor against devices/schema.json (errors name the "
                                       "offending field) and print it.")
    show.add_argument("arch", metavar="ARCH", help="a path or a bundled name (x86_64-avx2, ada_mock, ...)")
    show.set_defaults(handler=devices_show)
    flags = dsub.add_parser("cflags", help="print a descriptor's C compiler flags (for build scripts)",
                            description="Print the compiler flags a CPU descriptor asks for (e.g. -mavx2 -mfma), "
                                        "space-separated, so a Makefile or meson.build compiling generated "
                                        "kernels itself passes the same flags.")
    flags.add_argument("arch", metavar="ARCH", help="a path or a bundled name")
    flags.set_defaults(handler=devices_cflags)
    cross = dsub.add_parser("cross-file", help="print a CPU descriptor's meson cross file",
                            description="Print the meson cross file that builds a CPU descriptor's code on a "
                                        "machine of another architecture, from its `toolchain` (the file "
                                        "`openinfer gen` writes beside such a project): for a meson project "
                                        "that compiles generated sources itself, `meson setup build "
                                        "--cross-file FILE`.")
    cross.add_argument("arch", metavar="ARCH", help="a path or a bundled name (aarch64-neon, armv7-generic, ...)")
    cross.add_argument("--out", "-o", metavar="FILE", help="write it here (default: print)")
    cross.set_defaults(handler=devices_cross_file)
    probe = dsub.add_parser("probe", help="describe this machine's CPU (and Vulkan devices)",
                            description="Write a descriptor for this machine's CPU from /proc/cpuinfo (`flags` "
                                        "on x86-64, `Features` on Arm) and sysfs: "
                                        "ISA features, vector width, cache sizes, thread count and compiler flags; "
                                        "and one per Vulkan device (limits and features as the driver reports "
                                        "them, through the Vulkan loader).")
    probe.add_argument("--out", "-o", metavar="FILE", help="write the CPU descriptor here (default: print)")
    probe.add_argument("--vulkan-out", metavar="DIR",
                       help="write one descriptor per Vulkan device into DIR (vulkan-<index>.json)")
    probe.set_defaults(handler=devices_probe)


def devices_list(args) -> int:
    for path in bundled():
        dev = load_device(path)
        target = target_for(dev).label
        print(f"{path.stem:<20} {target:<12} {dev.name}")
    return 0


def devices_show(args) -> int:
    dev = load_device(args.arch)
    print(json.dumps(dev.doc, indent=2))
    return 0


def devices_cflags(args) -> int:
    print(" ".join(load_device(args.arch).cflags))
    return 0


def devices_cross_file(args) -> int:
    check_output_path(args.out, "--out")
    text = cross_file_text(load_device(args.arch))
    if args.out is None:
        print(text, end="")
    else:
        write_text(args.out, text)
        print(f"wrote {args.out}")
    return 0


def devices_probe(args) -> int:
    check_output_path(args.out, "--out")
    if args.vulkan_out == "":
        raise OpenInferError("--vulkan-out: the folder's path is empty")
    text = json.dumps(probe_cpu(), indent=2) + "\n"
    if args.out is not None:
        write_text(args.out, text)
        print(f"wrote {args.out}")
    elif args.vulkan_out is None:
        print(text, end="")
    gpus = probe_vulkan()
    if args.vulkan_out is not None:
        for i, doc in enumerate(gpus):
            path = Path(args.vulkan_out) / f"vulkan-{i}.json"
            write_text(path, json.dumps(doc, indent=2) + "\n")
            print(f"wrote {path} ({doc['device']['name']})")
    elif args.out is None:
        for i, doc in enumerate(gpus):
            print(f"# Vulkan device {i}: {doc['device']['name']} ({doc['device']['vendor']}); "
                  "write it with --vulkan-out DIR")
            print(json.dumps(doc, indent=2))
    elif gpus:
        print(f"{len(gpus)} Vulkan device(s): " + ", ".join(d["device"]["name"] for d in gpus)
              + " (--vulkan-out DIR writes their descriptors)")
    return 0
