//! A small internet on this machine, made of network namespaces: public
//! hosts on one switched segment (203.0.113.0/24, a documentation range),
//! and homes, each alone on its LAN (10.N.0.0/24) behind its own NAT router
//! (nftables masquerading). Nothing leaves the namespaces the test makes;
//! all of them go when the [`Internet`] is dropped, on every exit path.
//!
//! Making namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN); where
//! that is not given, [`Internet::new`] says why and the test skips.

use std::net::Ipv4Addr;
use std::process::Command;

/// How a home's router maps its hosts' connections to the outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nat {
    /// Keeps a connection's source port where it can (Linux's masquerade):
    /// a port mapped for one peer is the port others see too, so two such
    /// homes can punch a hole to each other.
    PortPreserving,
    /// A new random port for every connection (a symmetric NAT): what one
    /// peer sees is no use to another, and holes cannot be punched.
    Symmetric,
}

/// A host of the internet: the namespace its processes run in, and its address.
#[derive(Debug, Clone)]
pub struct Host {
    pub ns: String,
    pub ip: Ipv4Addr,
}

impl Host {
    /// `program args` run in this host's namespace.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.ns]).arg(program);
        command
    }

    /// Runs `work` on a thread of its own inside this host's namespace:
    /// the sockets it opens, and those of the threads it starts (a tokio
    /// runtime's), are the host's. Its panic is this caller's.
    pub fn run<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> T {
        self.spawn(work)
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    /// [`Host::run`], without waiting for `work` to end.
    pub fn spawn<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        use std::os::fd::AsRawFd as _;
        let path = format!("/var/run/netns/{}", self.ns);
        let namespace = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        std::thread::spawn(move || {
            // SAFETY: setns only switches this thread's network namespace,
            // given a descriptor of one that stays open for the call.
            let entered = unsafe { libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(entered, 0, "setns: {}", std::io::Error::last_os_error());
            drop(namespace);
            work()
        })
    }
}

/// The namespaces of one test's internet, removed on drop.
pub struct Internet {
    prefix: String,
    /// Made so far, in order; removed in the reverse order.
    namespaces: Vec<String>,
    switch: String,
}

impl Internet {
    /// An empty internet (a switch with nothing on it), or `None` with the
    /// reason on stderr where this machine does not let the test make
    /// namespaces or NAT rules.
    pub fn new() -> Option<Internet> {
        for (tool, package) in [("ip", "iproute2"), ("nft", "nftables")] {
            if super::which(tool).is_none() {
                eprintln!("SKIPPED: `{tool}` is not installed (Debian package {package})");
                return None;
            }
        }
        sweep_stale();
        // Tests run side by side: each internet has names of its own.
        static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let prefix = format!("{STALE_PREFIX}{}-{n}-", std::process::id());
        let mut internet = Internet {
            switch: format!("{prefix}sw"),
            prefix,
            namespaces: Vec::new(),
        };
        if let Err(why) = internet.add_namespace(&internet.switch.clone()) {
            eprintln!("SKIPPED: this machine does not let the test make network namespaces: {why}");
            return None;
        }
        let switch = internet.switch.clone();
        internet.must(&["-n", &switch, "link", "add", "name", "sw", "type", "bridge"]);
        internet.must(&["-n", &switch, "link", "set", "sw", "up"]);
        Some(internet)
    }

    /// A public host at 203.0.113.`n`.
    pub fn public_host(&mut self, n: u8) -> Host {
        let ns = format!("{}p{n}", self.prefix);
        let ip = Ipv4Addr::new(203, 0, 113, n);
        self.namespace(&ns);
        self.plug_into_switch(&ns, "eth0", ip, &format!("p{n}"));
        Host { ns, ip }
    }

    /// A home host at 10.`n`.0.2 behind its own router, whose outside
    /// address is 203.0.113.(100 + `n`), translating as `nat` says.
    pub fn home(&mut self, n: u8, nat: Nat) -> Host {
        let router = format!("{}r{n}", self.prefix);
        let ns = format!("{}h{n}", self.prefix);
        self.namespace(&router);
        self.namespace(&ns);
        self.plug_into_switch(
            &router,
            "wan",
            Ipv4Addr::new(203, 0, 113, 100 + n),
            &format!("r{n}"),
        );
        let lan_router = format!("10.{n}.0.1/24");
        let lan_host = format!("10.{n}.0.2/24");
        self.must(&[
            "-n", &router, "link", "add", "name", "lan", "type", "veth", "peer", "eth0", "netns",
            &ns,
        ]);
        self.must(&["-n", &router, "addr", "add", &lan_router, "dev", "lan"]);
        self.must(&["-n", &router, "link", "set", "lan", "up"]);
        self.must(&["-n", &ns, "addr", "add", &lan_host, "dev", "eth0"]);
        self.must(&["-n", &ns, "link", "set", "eth0", "up"]);
        self.must(&[
            "-n",
            &ns,
            "route",
            "add",
            "default",
            "via",
            &format!("10.{n}.0.1"),
        ]);
        run(Command::new("ip").args([
            "netns",
            "exec",
            &router,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ]));
        let masquerade = match nat {
            Nat::PortPreserving => "masquerade",
            Nat::Symmetric => "masquerade fully-random",
        };
        // Out through `wan`, the home's connections take the router's
        // address; in, only answers to them pass (conntrack), and anything
        // else is dropped without a word, as a home router does (an answer
        // such as a TCP reset would spoil the first packets of a hole punch).
        let rules = format!(
            "table ip nat {{
  chain post {{
    type nat hook postrouting priority 100;
    oifname \"wan\" {masquerade}
  }}
}}
table ip filter {{
  chain input {{
    type filter hook input priority 0;
    iifname \"wan\" ct state new drop
  }}
  chain forward {{
    type filter hook forward priority 0;
    iifname \"wan\" ct state new drop
  }}
}}
"
        );
        let mut nft = Command::new("ip");
        nft.args(["netns", "exec", &router, "nft", "-f", "-"]);
        run_with_input(&mut nft, &rules);
        Host {
            ns,
            ip: Ipv4Addr::new(10, n, 0, 2),
        }
    }

    /// A host alone in its namespace whose loopback carries every address
    /// of `hosts`, each with the TCP ports its programs listen and dial
    /// from: what runs there sees each address as a host of its own (for
    /// many in-process nodes at addresses they take as public, see
    /// [`Host::run`]). On loopback the kernel gives a connection the
    /// address it goes to as its source, so each connection leaving from
    /// a host's ports is given the host's address (nftables source NAT),
    /// as a peer at another host would see it; that needs the programs to
    /// dial from the port they listen at (libp2p's port reuse).
    pub fn room(&mut self, hosts: &[(Ipv4Addr, std::ops::Range<u16>)]) -> Host {
        let ns = format!("{}room{}", self.prefix, self.namespaces.len());
        self.namespace(&ns);
        let mut sources = Vec::new();
        for (address, ports) in hosts {
            self.must(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{address}/32"),
                "dev",
                "lo",
            ]);
            sources.extend(ports.clone().map(|port| format!("{port} : {address}")));
        }
        let rules = format!(
            "table ip room {{
  chain post {{
    type nat hook postrouting priority 100;
    snat to tcp sport map {{ {} }}
  }}
}}
",
            sources.join(", ")
        );
        let mut nft = Command::new("ip");
        nft.args(["netns", "exec", &ns, "nft", "-f", "-"]);
        run_with_input(&mut nft, &rules);
        Host { ns, ip: hosts[0].0 }
    }

    /// Programs run on `host` (through [`Host::command`]) ask `nameserver`
    /// to resolve names: `ip netns exec` puts `/etc/netns/<namespace>/resolv.conf`
    /// in place of `/etc/resolv.conf`. Removed with the internet.
    pub fn resolver(&mut self, host: &Host, nameserver: Ipv4Addr) {
        let dir = format!("/etc/netns/{}", host.ns);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            format!("{dir}/resolv.conf"),
            format!("nameserver {nameserver}\n"),
        )
        .unwrap();
    }

    fn namespace(&mut self, ns: &str) {
        if let Err(why) = self.add_namespace(ns) {
            panic!("cannot make namespace {ns}: {why}");
        }
    }

    fn add_namespace(&mut self, ns: &str) -> Result<(), String> {
        let output = Command::new("ip")
            .args(["netns", "add", ns])
            .output()
            .map_err(|e| e.to_string())?;
        if !output.status.success() {
            return Err(String::from_utf8_lossy(&output.stderr).trim().to_owned());
        }
        self.namespaces.push(ns.to_owned());
        self.must(&["-n", ns, "link", "set", "lo", "up"]);
        Ok(())
    }

    /// Connects `ns` to the switch through a veth pair: `inside` (with
    /// address `ip`) in `ns`, `port` on the switch.
    fn plug_into_switch(&self, ns: &str, inside: &str, ip: Ipv4Addr, port: &str) {
        let switch = &self.switch;
        self.must(&[
            "-n", ns, "link", "add", "name", inside, "type", "veth", "peer", port, "netns", switch,
        ]);
        self.must(&["-n", switch, "link", "set", port, "master", "sw", "up"]);
        self.must(&["-n", ns, "addr", "add", &format!("{ip}/24"), "dev", inside]);
        self.must(&["-n", ns, "link", "set", inside, "up"]);
    }

    fn must(&self, args: &[&str]) {
        run(Command::new("ip").args(args));
    }
}

impl Drop for Internet {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth ends in it, and with them
        // their peers. Processes still inside keep theirs alive: the tests
        // stop their servers before the internet goes.
        for ns in self.namespaces.iter().rev() {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
            let _ = std::fs::remove_dir_all(format!("/etc/netns/{ns}"));
        }
    }
}

/// Every namespace a test makes starts so, then its process id.
const STALE_PREFIX: &str = "agentsite-";

/// Removes the namespaces of test processes that are gone (killed before
/// they could clean up).
fn sweep_stale() {
    let Ok(output) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(pid) = name
            .strip_prefix(STALE_PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
            let _ = std::fs::remove_dir_all(format!("/etc/netns/{name}"));
        }
    }
}

fn run(command: &mut Command) {
    let output = command.output().expect("the command runs");
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn run_with_input(command: &mut Command, input: &str) {
    use std::io::Write as _;
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the command runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}
