//! Fairness between client addresses: one address gets at most a share of the connections (the accept loop,
//! [`crate::server`]) and of the API's slots (the middleware [`limit_requests`]), so a single host cannot
//! fill the server with idle sockets or slow requests while everyone else is turned away.
//!
//! An address is an IPv4 address, or an IPv6 /64 (one host usually holds a whole /64, so counting single
//! IPv6 addresses would give it billions of shares). The counts live in memory, one entry per address that
//! holds something right now.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::problem::Problem;

/// `Retry-After` seconds sent with 429 when an address has all its API slots in use.
pub const ADDRESS_BUSY_RETRY_AFTER_SECS: u64 = 1;

/// The address a client is counted under: IPv4 (also when mapped into IPv6), or the IPv6 /64.
pub fn address_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
        },
    }
}

/// At most `cap` of something (connections, requests) per address at once.
#[derive(Debug, Clone)]
pub struct AddressSlots {
    cap: u32,
    held: Arc<Mutex<HashMap<IpAddr, u32>>>,
}

impl AddressSlots {
    /// Slots for `cap` at once per address.
    pub fn new(cap: u32) -> Self {
        AddressSlots { cap, held: Arc::default() }
    }

    /// Takes one of `ip`'s slots; `None` when its address holds `cap` already. The slot is freed when the
    /// guard is dropped.
    pub fn try_take(&self, ip: IpAddr) -> Option<AddressSlot> {
        let address = address_of(ip);
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let count = held.get(&address).copied().unwrap_or(0);
        if count >= self.cap {
            return None;
        }
        held.insert(address, count + 1);
        Some(AddressSlot { held: Arc::clone(&self.held), address })
    }

    /// How many slots `ip`'s address holds.
    pub fn held_by(&self, ip: IpAddr) -> u32 {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.get(&address_of(ip)).copied().unwrap_or(0)
    }
}

/// One slot of an address; freed on drop (also when the request or connection is dropped half way).
#[derive(Debug)]
pub struct AddressSlot {
    held: Arc<Mutex<HashMap<IpAddr, u32>>>,
    address: IpAddr,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = held.get_mut(&self.address) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.address);
            }
        }
    }
}

/// Middleware: an API request holds one of its address's slots while it runs; over the address's share it is
/// refused at once with 429 and `Retry-After`. A request without a peer address (the router driven without
/// the accept loop, as in unit tests) is not counted.
pub async fn limit_requests(State(slots): State<AddressSlots>, request: Request, next: Next) -> Response {
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|info| info.0.ip());
    let _slot = match peer.map(|ip| slots.try_take(ip)) {
        Some(None) => return busy(slots.cap).into_response(),
        Some(slot) => slot,
        None => None,
    };
    next.run(request).await
}

fn busy(cap: u32) -> Problem {
    Problem::new(
        StatusCode::TOO_MANY_REQUESTS,
        "address-busy",
        "Too many requests",
        format!(
            "This address already has {cap} API requests in flight (--max-requests-per-ip); nothing was done. \
             Retry with the same Idempotency-Key."
        ),
    )
    .with_retry_after(ADDRESS_BUSY_RETRY_AFTER_SECS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_at_most_its_cap_and_gets_slots_back() {
        let slots = AddressSlots::new(2);
        let (a, b): (IpAddr, IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        let first = slots.try_take(a);
        let second = slots.try_take(a);
        assert!(first.is_some() && second.is_some());
        assert!(slots.try_take(a).is_none(), "over the cap");
        assert!(slots.try_take(b).is_some(), "another address has its own share");
        drop(first);
        assert_eq!(slots.held_by(a), 1);
        assert!(slots.try_take(a).is_some());
    }

    #[test]
    fn ipv6_hosts_are_counted_by_their_64() {
        let one: IpAddr = "2001:db8:1:2:aaaa::1".parse().expect("ip");
        let same: IpAddr = "2001:db8:1:2:ffff::9".parse().expect("ip");
        let other: IpAddr = "2001:db8:1:3::1".parse().expect("ip");
        assert_eq!(address_of(one), address_of(same));
        assert_ne!(address_of(one), address_of(other));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().expect("ip");
        assert_eq!(address_of(mapped), IpAddr::from([192, 0, 2, 7]));
    }

    #[test]
    fn an_address_with_nothing_held_leaves_no_entry() {
        let slots = AddressSlots::new(1);
        let ip: IpAddr = [10, 0, 0, 3].into();
        drop(slots.try_take(ip));
        assert!(slots.held.lock().expect("lock").is_empty());
    }
}
