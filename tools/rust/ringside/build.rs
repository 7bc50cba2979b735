//! Builds the C baseline for `cargo run --release --example bench`, when it can: the repository's
//! C producer (`Sources/CRingside`) and the bench's C loops (`bench/c_loop.c`), compiled with
//! `cc -O2 -std=gnu11 -pthread` into a static library that only the examples link. The library
//! itself needs no C compiler: without the sources or a compiler, nothing is built, and the bench
//! says the baseline is unavailable.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(ringside_c_baseline)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=bench/c_loop.c");
    println!("cargo::rerun-if-env-changed=CC");
    println!("cargo::rerun-if-env-changed=AR");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    if let Some(version) =
        Command::new(&rustc).arg("--version").output().ok().and_then(|o| String::from_utf8(o.stdout).ok())
    {
        println!("cargo::rustc-env=RINGSIDE_BENCH_RUSTC={}", version.trim());
    }
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let sources = manifest.join("../../../Sources/CRingside");
    let files = [sources.join("ringside.c"), sources.join("ringside_producer.c"), manifest.join("bench/c_loop.c")];
    if !files.iter().all(|f| f.is_file()) {
        return; // not in the Ringside repository: no baseline, silently
    }
    for header in ["ringside.h", "ringside_producer.h"] {
        println!("cargo::rerun-if-changed={}", sources.join("include").join(header).display());
    }
    for file in &files[..2] {
        println!("cargo::rerun-if-changed={}", file.display());
    }
    match build(&sources.join("include"), &files) {
        Ok(library) => {
            // Linked into the examples only: the library's users never link C.
            println!("cargo::rustc-link-arg-examples={}", library.display());
            println!("cargo::rustc-link-arg-examples=-lpthread");
            println!("cargo::rustc-cfg=ringside_c_baseline");
        }
        Err(why) => println!("cargo::warning=the bench's C baseline is unavailable: {why}"),
    }
}

fn build(include: &Path, files: &[PathBuf]) -> Result<PathBuf, String> {
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let ar = std::env::var("AR").unwrap_or_else(|_| "ar".into());
    let mut objects = Vec::new();
    for file in files {
        let object = out.join(file.file_stem().unwrap()).with_extension("o");
        let output = Command::new(&cc)
            .args(["-O2", "-std=gnu11", "-pthread", "-fPIE", "-c"])
            .arg("-I")
            .arg(include)
            .arg(file)
            .arg("-o")
            .arg(&object)
            .output()
            .map_err(|e| format!("cannot run {cc}: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "{cc} failed on {}: {}",
                file.display(),
                String::from_utf8_lossy(&output.stderr).lines().next().unwrap_or("")
            ));
        }
        objects.push(object);
    }
    let library = out.join("libringside_c_baseline.a");
    let _ = std::fs::remove_file(&library);
    let status = Command::new(&ar)
        .arg("crs")
        .arg(&library)
        .args(&objects)
        .status()
        .map_err(|e| format!("cannot run {ar}: {e}"))?;
    if !status.success() {
        return Err(format!("{ar} failed"));
    }
    let version = Command::new(&cc).arg("--version").output().ok();
    let version = version
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_else(|| cc.clone());
    println!("cargo::rustc-env=RINGSIDE_BENCH_CC={version}");
    Ok(library)
}
