//! The wall clock, as the node writes times down: since the Unix epoch, in
//! milliseconds (goals, messages, announcements) or seconds (agent
//! records, manifests, completions, the model ledger's days).

/// Now, in milliseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Now, in seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
