"""The Python producer's runner of the conformance table (Tests/conformance/cases.txt; its head
says the operations): runs every case through one backend, each case's bot in DIR.

    py_runner.py PACKAGE CASES DIR pure|extension [EXTENSION_DIR]

PACKAGE: tools/python. EXTENSION_DIR: where the C extension was built (setup.py build_ext
--build-lib), searched for ringside/_ringside. Exit status 0: every case ran; 1: an operation
failed, or the extension cannot be loaded (the traceback says which); 2: usage.
"""
from __future__ import annotations

import importlib
import os
import sys
from typing import Any


def main(argv: list[str]) -> int:
    if len(argv) not in (5, 6) or argv[4] not in ("pure", "extension"):
        print(__doc__, file=sys.stderr)
        return 2
    package, cases, directory, backend_name = argv[1:5]
    sys.path.insert(0, package)
    ringside = importlib.import_module("ringside")
    if backend_name == "extension":
        if len(argv) == 6:
            ringside.__path__.append(os.path.join(argv[5], "ringside"))
        backend = importlib.import_module("ringside._ringside")
    else:
        backend = importlib.import_module("ringside._pure")
    bot: Any = None
    metrics: dict[str, Any] = {}
    name = ""
    skipping = False  # the case's attach was refused, as it asked: its other lines are skipped
    with open(cases, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            op, args = words[0], words[1:]
            try:
                if op == "case":
                    name, metrics, skipping = args[0], {}, False
                elif skipping or op == "plant":
                    continue  # the suite plants
                elif op == "attach":
                    sizes = {key: int(value) for key, value in (word.split("=", 1) for word in args)}
                    worker = sizes.pop("worker", 0) == 1
                    refused = sizes.pop("refused", 0) == 1
                    try:
                        bot = ringside.Bot(name, directory, worker=worker, _backend=backend, **sizes)
                    except ringside.RingError as error:
                        if not refused:
                            raise
                        print(f"refused {name}: {error}", flush=True)
                        skipping = True
                        continue
                    if refused:
                        raise ValueError(f"attach of {name} was not refused")
                elif op in ("histogram", "counter", "gauge"):
                    metric = args[0]
                    options: dict[str, Any] = {}
                    labels: dict[str, str] = {}
                    for word in args[1:]:
                        key, value = word.split("=", 1)
                        if key == "label":
                            label, label_value = value.split("=", 1)
                            labels[label] = label_value
                        elif key == "scale":
                            options["resolution"] = 10.0 ** int(value)
                        elif key == "signed":
                            options["signed"] = value == "1"
                        else:
                            options[key] = int(value) if key == "sample_every" else value
                    metrics[metric] = getattr(bot, op)(metric, labels=labels, **options)
                elif op == "observe":
                    pairs = [word.removeprefix("exemplar=").split("=", 1) for word in args[2:]]
                    exemplar = {key: value for key, value in pairs} or None
                    metrics[args[0]].observe(int(args[1]), exemplar=exemplar)
                elif op == "observe_value":
                    metrics[args[0]].observe(float(args[1]))
                elif op == "count":
                    metrics[args[0]].inc(int(args[1]))
                elif op == "set":
                    metrics[args[0]].set(float(args[1]))
                elif op == "retire":  # RETIRING A SERIES: what remove() does to a series of a family (Core.retire)
                    bot._core.retire(metrics[args[0]]._index)
                elif op == "end":
                    bot.close()
                    bot = None
                else:
                    raise ValueError(f"unknown operation {op}")
            except Exception as error:
                print(f"{cases}:{number}: {error!r}", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
