//! The wall clock, as the node writes times down: milliseconds since the
//! Unix epoch (records, messages, announcements).

/// Now, in milliseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
