//! A DNS server for a test's internet: it answers TXT queries for the
//! names it is given (the `_dnsaddr.` records that libp2p resolves
//! `/dnsaddr/…` addresses with) and nothing else, on a thread inside a
//! host's namespace, at the host's address, port 53, until dropped.

use super::netns::Host;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType, rdata::TXT};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A running server; it stops when dropped.
pub struct Dns {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Dns {
    /// Serves `records` (a name, without its final dot, and its TXT
    /// strings) at `host`'s address.
    pub fn serve(host: &Host, records: HashMap<String, Vec<String>>) -> Dns {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let ip = host.ip;
        let (bound, started) = std::sync::mpsc::channel();
        let thread = host.spawn(move || {
            let socket = std::net::UdpSocket::bind((ip, 53)).expect("the DNS server binds port 53");
            socket
                .set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            bound.send(()).unwrap();
            let mut buffer = [0u8; 1500];
            while !stopping.load(Ordering::Relaxed) {
                let Ok((length, from)) = socket.recv_from(&mut buffer) else {
                    continue;
                };
                let Ok(query) = Message::from_vec(&buffer[..length]) else {
                    continue;
                };
                if let Ok(answer) = answer(&query, &records).to_vec() {
                    let _ = socket.send_to(&answer, from);
                }
            }
        });
        started
            .recv_timeout(Duration::from_secs(5))
            .expect("the DNS server started");
        Dns {
            stop,
            thread: Some(thread),
        }
    }
}

/// The answer to `query`: the TXT records of the names asked for that
/// `records` has, or "no such name".
fn answer(query: &Message, records: &HashMap<String, Vec<String>>) -> Message {
    let mut answer = Message::response(query.metadata.id, query.metadata.op_code);
    answer.metadata.authoritative = true;
    answer.metadata.recursion_desired = query.metadata.recursion_desired;
    answer.metadata.recursion_available = true;
    for question in &query.queries {
        answer.add_query(question.clone());
        let name = question
            .name()
            .to_ascii()
            .trim_end_matches('.')
            .to_ascii_lowercase();
        if question.query_type() == RecordType::TXT
            && let Some(texts) = records.get(&name)
        {
            for text in texts {
                answer.add_answer(Record::from_rdata(
                    question.name().clone(),
                    60,
                    RData::TXT(TXT::new(vec![text.clone()])),
                ));
            }
        }
    }
    if answer.answers.is_empty() {
        answer.metadata.response_code = ResponseCode::NXDomain;
    }
    answer
}

impl Drop for Dns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
