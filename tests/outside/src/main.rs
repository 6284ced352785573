//! Assigns a tiny group with the sticky sample, natively: proof that the sample links as a
//! plain library into a crate of someone else's.

use assignor_sdk::TaskAssignor as _;

fn main() {
    let assignor = sticky_assignor::StickyAssignor::new();
    println!("{}", assignor.name());
}
