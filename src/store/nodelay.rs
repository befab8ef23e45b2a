//! Works around sqlx 0.9.0 connecting to PostgreSQL without `TCP_NODELAY`
//! (launchbadge/sqlx#4335, fixed upstream after 0.9.0): Nagle's algorithm and
//! delayed ACKs then stall every multi-segment message by ~40 ms, which capped
//! intake on PostgreSQL at a few hundred deliveries a second.
//!
//! sqlx gives no access to its socket, so after each new PostgreSQL connection
//! this sets `TCP_NODELAY` on every TCP socket of the process. That is
//! harmless for the others (HTTP and GitHub connections want it too). Remove
//! this module once the sqlx release with the fix is in use.

use std::os::fd::RawFd;

/// Sets `TCP_NODELAY` on every open TCP socket of this process; returns how
/// many were set. Errors (no `/proc`, a closed fd) are skipped.
pub fn set_on_all_tcp_sockets() -> usize {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    let mut set = 0;
    for entry in entries.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<RawFd>().ok())
        else {
            continue;
        };
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"));
        if is_socket && is_tcp_stream(fd) && enable_nodelay(fd) {
            set += 1;
        }
    }
    set
}

fn is_tcp_stream(fd: RawFd) -> bool {
    let mut kind: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `kind` and `len` are valid for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut kind as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 || kind != libc::SOCK_STREAM {
        return false;
    }
    let mut domain: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: as above.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&mut domain as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    rc == 0 && (domain == libc::AF_INET || domain == libc::AF_INET6)
}

fn enable_nodelay(fd: RawFd) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: `on` is a valid c_int for the duration of the call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn nodelay(fd: RawFd) -> bool {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: valid out-pointers.
        unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            );
        }
        value != 0
    }

    #[test]
    fn open_tcp_streams_get_nodelay() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert!(!nodelay(client.as_raw_fd()), "the default has Nagle on");
        assert!(set_on_all_tcp_sockets() >= 1);
        assert!(nodelay(client.as_raw_fd()));
    }
}
