//! Names another user took, as the tests plant them: in a directory shared as /dev/shm is, user
//! nobody's FIFO, device, directory or socket at a bot's name (tests/planted.rs, and the planted
//! cases of the conformance table). Planting needs root: callers ask `root_or_skip` first.

use super::fork::{as_nobody, NOBODY};
use super::ScratchDir;
use std::ffi::CString;
use std::fs::Permissions;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::Path;

extern "C" {
    fn mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
    fn mknod(path: *const std::ffi::c_char, mode: u32, device: u64) -> i32;
}

/// What nobody plants, and how the bot names it.
pub const KINDS: [(&str, &str); 4] = [
    ("fifo", "a FIFO (named pipe)"),
    ("device", "a character device"),
    ("directory", "a directory"),
    ("socket", "a socket"),
];

/// A directory shared as /dev/shm is: sticky, everyone may create.
pub fn shared_dir(test: &str) -> ScratchDir {
    let dir = ScratchDir::new(test);
    std::fs::set_permissions(&dir.path, Permissions::from_mode(0o1777)).unwrap();
    dir
}

/// Makes `kind` at `path`, owned by nobody: a FIFO, a directory and a socket by nobody itself; a
/// device (1:3, what /dev/null is) by root, given to nobody (only root may make one).
pub fn plant(kind: &str, path: &Path) {
    let name = CString::new(path.as_os_str().as_bytes()).unwrap();
    if kind == "device" {
        // SAFETY: a NUL-terminated path; S_IFCHR | 0644, device 1:3 in Linux's encoding of small numbers.
        assert_eq!(unsafe { mknod(name.as_ptr(), 0o020644, (1 << 8) | 3) }, 0, "mknod {}", path.display());
        std::os::unix::fs::lchown(path, Some(NOBODY), Some(NOBODY)).unwrap();
        return;
    }
    as_nobody(|| match kind {
        // SAFETY: a NUL-terminated path.
        "fifo" => assert_eq!(unsafe { mkfifo(name.as_ptr(), 0o644) }, 0, "mkfifo"),
        "directory" => std::fs::create_dir(path).unwrap(),
        _ => drop(UnixListener::bind(path).unwrap()),
    })
    .unwrap();
}

/// Whether what is at `path` is still nobody's `kind`: untouched by the bot refused.
pub fn still_planted(kind: &str, path: &Path) -> bool {
    let Ok(metadata) = std::fs::symlink_metadata(path) else { return false };
    let file_type = metadata.file_type();
    metadata.uid() == NOBODY
        && match kind {
            "fifo" => file_type.is_fifo(),
            "device" => file_type.is_char_device(),
            "directory" => file_type.is_dir(),
            _ => file_type.is_socket(),
        }
}
