"""Builds ringside's C extension over ringside_producer.h when it can.

The extension is optional: without a C compiler or Python's headers the build says why and the
package installs with its pure-Python backend alone (ringside.ACCELERATED is then False).
RINGSIDE_REQUIRE_EXTENSION=1 (or true, yes) in the environment makes a failed build of the
extension an error instead, so the install fails rather than fall back to the pure backend.
ringside/_csrc links to the C producer in the repository (Sources/CRingside); a source
distribution holds copies of the files (MANIFEST.in names the headers).
"""
import os

from setuptools import Extension, setup

producer = "ringside/_csrc"
required = os.environ.get("RINGSIDE_REQUIRE_EXTENSION", "").lower() in ("1", "true", "yes")

setup(ext_modules=[Extension(
    "ringside._ringside",
    sources=["ringside/_ringside.c", f"{producer}/ringside_producer.c", f"{producer}/ringside.c"],
    include_dirs=[f"{producer}/include"],
    depends=[f"{producer}/include/ringside.h", f"{producer}/include/ringside_producer.h"],
    extra_compile_args=["-std=gnu11", "-O2", "-pthread"],
    extra_link_args=["-pthread"],
    optional=not required,  # optional: a failed build warns and installs the pure backend
)])
