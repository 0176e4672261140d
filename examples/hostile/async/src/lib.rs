//! A hostile agent built on WASI 0.3: it waits on a future nobody will
//! ever resolve, writes a stream that never ends, hands the host one write
//! as large as its memory allows, plants links that lead out of the
//! folder it was granted, and dials TCP past the node's HTTP grants. Each must end by the node's deadline or bounds,
//! or be refused, and leave the node serving.

use agentsite_sdk::agent;
use wasip3::cli::types::ErrorCode;
use wasip3::{wit_future, wit_stream};

struct Pending;

/// Waits forever, floods and links out, through WASI 0.3.
#[agent(name = "hostile-async")]
impl Pending {
    /// Awaits a future whose writer is kept but never written.
    #[tool]
    async fn forever() -> String {
        // A payload type the WASI bindings already carry.
        let (writer, reader) = wit_future::new::<Result<(), ErrorCode>>(|| Ok(()));
        std::mem::forget(writer);
        format!("resolved with {:?}", reader.await)
    }

    /// Writes to stdout through a stream, 64 KiB at a time, without end.
    #[tool]
    async fn endless() -> String {
        let (mut tx, rx) = wit_stream::new();
        let written = async move {
            loop {
                let left = tx.write_all(vec![b'x'; 64 * 1024]).await;
                if !left.is_empty() {
                    return;
                }
            }
        };
        let ((), _) = futures::join!(
            written,
            wasip3::cli::stdout::write_via_stream(rx).into_future()
        );
        "the stream ended".into()
    }

    /// Hands stdout one write of `mib` MiB.
    #[tool]
    async fn gulp(
        /// How many MiB to write at once.
        mib: u32,
    ) -> String {
        let (mut tx, rx) = wit_stream::new();
        let bytes = vec![b'y'; mib as usize * 1024 * 1024];
        let written = async move {
            let left = tx.write_all(bytes).await;
            left.len()
        };
        let (left, _) = futures::join!(
            written,
            wasip3::cli::stdout::write_via_stream(rx).into_future()
        );
        format!("{left} bytes were not taken")
    }

    /// Makes a symbolic link at `link` pointing at `target`, in the first
    /// folder the agent was granted.
    #[tool]
    async fn link(
        /// What the link points at.
        target: String,
        /// Where the link is made, relative to the folder.
        link: String,
    ) -> Result<String, String> {
        let folders = wasip3::filesystem::preopens::get_directories();
        let (folder, _) = folders.first().ok_or("no folder was granted")?;
        folder
            .symlink_at(target.clone(), link.clone())
            .await
            .map_err(|e| format!("cannot link {link} to {target}: {e:?}"))?;
        Ok(format!("linked {link} to {target}"))
    }

    /// Opens a TCP connection to 127.0.0.1:`port` with WASI 0.3's sockets,
    /// around the HTTP grants; says whether it got through.
    #[tool]
    async fn dial(
        /// The loopback port to connect to.
        port: u16,
    ) -> Result<String, String> {
        use wasip3::sockets::types::{
            IpAddressFamily, IpSocketAddress, Ipv4SocketAddress, TcpSocket,
        };
        let socket = TcpSocket::create(IpAddressFamily::Ipv4)
            .map_err(|e| format!("cannot make a socket: {e:?}"))?;
        let address = IpSocketAddress::Ipv4(Ipv4SocketAddress {
            port,
            address: (127, 0, 0, 1),
        });
        socket
            .connect(address)
            .await
            .map_err(|e| format!("cannot connect to port {port}: {e:?}"))?;
        Ok(format!("connected to port {port}"))
    }
}
