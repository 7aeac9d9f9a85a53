//! Whether an HTTP client is still connected while its request is being generated.
//!
//! tiny_http does not hand out the connection's socket, so the kernel's table of TCP
//! connections is read instead (`/proc/net/tcp`, `/proc/net/tcp6`): a client that gave up
//! closed its end, which leaves ours in CLOSE_WAIT (or gone). Elsewhere than Linux nothing is
//! known and the client counts as connected.

use std::net::{IpAddr, SocketAddr};

/// TCP state numbers of the kernel's table.
const ESTABLISHED: u8 = 0x01;

/// One connection of this server, by the server's port and the client's address.
#[derive(Debug, Clone, Copy)]
pub struct Connection {
    /// The port the server listens on.
    pub server_port: u16,
    /// The client's address and port.
    pub client: SocketAddr,
}

impl Connection {
    /// False once the client closed its end or the connection is gone; true while it is
    /// established, or when the table cannot be read.
    pub fn client_connected(&self) -> bool {
        let mut seen_table = false;
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let Ok(text) = std::fs::read_to_string(table) else { continue };
            seen_table = true;
            if let Some(state) = text.lines().skip(1).find_map(|line| self.state_in(line)) {
                return state == ESTABLISHED;
            }
        }
        !seen_table
    }

    /// The state of this connection if `line` (one row of the table) is it.
    fn state_in(&self, line: &str) -> Option<u8> {
        let mut fields = line.split_whitespace().skip(1);
        let local = parse_address(fields.next()?)?;
        let remote = parse_address(fields.next()?)?;
        let state = u8::from_str_radix(fields.next()?, 16).ok()?;
        let same_client = remote.port() == self.client.port() && same_ip(remote.ip(), self.client.ip());
        (local.port() == self.server_port && same_client).then_some(state)
    }
}

/// IPv4 addresses appear as IPv4-mapped IPv6 addresses in the tcp6 table.
fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    let canonical = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    canonical(a) == canonical(b)
}

/// `0100007F:1F40` (IPv4) or 32 hex digits and a port (IPv6), each 32-bit word in host order.
fn parse_address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..ip.len() / 8)
        .map(|i| ip.get(i * 8..i * 8 + 8).and_then(|w| u32::from_str_radix(w, 16).ok()))
        .collect::<Option<_>>()?;
    let ip = match words.as_slice() {
        [v4] => IpAddr::from(v4.to_ne_bytes()),
        [a, b, c, d] => {
            let mut bytes = [0u8; 16];
            for (chunk, word) in bytes.chunks_mut(4).zip([a, b, c, d]) {
                chunk.copy_from_slice(&word.to_ne_bytes());
            }
            IpAddr::from(bytes)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::{Duration, Instant};

    #[test]
    fn table_addresses_parse() {
        if cfg!(target_endian = "little") {
            assert_eq!(parse_address("0100007F:1F40"), Some("127.0.0.1:8000".parse().unwrap()));
            assert_eq!(
                parse_address("0000000000000000FFFF00000100007F:0050"),
                Some("[::ffff:127.0.0.1]:80".parse().unwrap())
            );
        }
        assert_eq!(parse_address("zz:1"), None);
    }

    #[test]
    fn a_client_that_closes_its_end_is_seen_gone() {
        if !std::path::Path::new("/proc/net/tcp").exists() {
            return;
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server_port = listener.local_addr().unwrap().port();
        let mut client = std::net::TcpStream::connect(("127.0.0.1", server_port)).unwrap();
        let (_accepted, client_addr) = listener.accept().unwrap();
        let connection = Connection { server_port, client: client_addr };
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        assert!(connection.client_connected());
        drop(client);
        let deadline = Instant::now() + Duration::from_secs(5);
        while connection.client_connected() {
            assert!(Instant::now() < deadline, "the closed client still looks connected");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
