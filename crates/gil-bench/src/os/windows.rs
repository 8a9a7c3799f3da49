//! Windows: a TCP connection over the loopback interface (Windows has
//! Unix-domain sockets only as a stream without a pair call), and no
//! process-wide count of context switches.

use std::io;
use std::net::{Ipv4Addr, TcpListener, TcpStream};

/// One end of a connected byte stream (a loopback TCP connection).
pub type Stream = TcpStream;

/// Two connected ends, with Nagle's algorithm off on both (a small
/// message is sent at once, as on a Unix-domain socket).
pub fn stream_pair() -> io::Result<(Stream, Stream)> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let ours = TcpStream::connect(listener.local_addr()?)?;
    let (theirs, _) = listener.accept()?;
    ours.set_nodelay(true)?;
    theirs.set_nodelay(true)?;
    Ok((ours, theirs))
}

/// Windows counts context switches per living thread only
/// (`NtQuerySystemInformation`), not for the process: `None`, and the
/// sweep prints no context-switch columns' figures.
pub fn context_switches() -> io::Result<Option<(u64, u64)>> {
    Ok(None)
}
