//! Network namespaces: make a socket or a TUN device inside a namespace
//! named by `ip netns add`, from a process that runs outside it.
//!
//! A socket or device belongs for its whole life to the namespace its
//! maker was in when it was made, whichever thread uses it later; so
//! [`in_netns`] runs the making on a thread of its own that first enters
//! the namespace, and the rest of the process stays where it was.

use std::io;
use std::os::fd::AsFd;

/// Where `ip netns` keeps its namespaces.
pub const NETNS_DIR: &str = "/var/run/netns";

/// Runs `f` on a thread inside the network namespace `name` and returns
/// its result; an error names the namespace if it does not exist or
/// cannot be entered (that needs CAP_SYS_ADMIN).
pub fn in_netns<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    let bad = name.is_empty()
        || name.len() > 255
        || name == "."
        || name == ".."
        || name.contains(['/', '\0']);
    if bad {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "\"{}\" is not a network namespace name",
                name.escape_debug()
            ),
        ));
    }
    let path = std::path::Path::new(NETNS_DIR).join(name);
    let ns = std::fs::File::open(&path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("network namespace \"{name}\" cannot be opened ({e}): make it first with `ip netns add {name}`"),
        )
    })?;
    std::thread::scope(|s| {
        s.spawn(|| {
            rustix::thread::move_into_link_name_space(
                ns.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .map_err(|e| {
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("cannot enter network namespace \"{name}\": {e} (needs root or CAP_SYS_ADMIN)"),
                )
            })?;
            Ok(f())
        })
        .join()
        .map_err(|_| io::Error::other(format!("making a device in network namespace \"{name}\" failed")))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_and_missing_namespaces_are_named() {
        for n in ["", "a/b", "..", "x\0"] {
            let e = in_netns(n, || ()).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{n:?}");
        }
        let e = in_netns("aurora-no-such-namespace", || ()).unwrap_err();
        assert!(
            e.to_string()
                .contains("ip netns add aurora-no-such-namespace"),
            "{e}"
        );
    }
}
