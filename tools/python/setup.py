"""Builds ringside's C extension over ringside_producer.h when it can.

The extension is optional: without a C compiler or Python's headers the build says why and the
package installs with its pure-Python backend alone (ringside.ACCELERATED is then False).
ringside/_csrc links to the C producer in the repository (Sources/CRingside).
"""
from setuptools import Extension, setup

producer = "ringside/_csrc"

setup(ext_modules=[Extension(
    "ringside._ringside",
    sources=["ringside/_ringside.c", f"{producer}/ringside_producer.c", f"{producer}/ringside.c"],
    include_dirs=[f"{producer}/include"],
    depends=[f"{producer}/include/ringside.h", f"{producer}/include/ringside_producer.h"],
    extra_compile_args=["-std=gnu11", "-O2", "-pthread"],
    extra_link_args=["-pthread"],
    optional=True,  # a failed build warns and installs the pure backend
)])
