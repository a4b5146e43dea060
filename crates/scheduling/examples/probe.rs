//! Temporary timing probe.
#[path = "../benches/fixture.rs"]
mod fixture;
use driftwood_scheduling::{packing_efficiency, schedule};
fn main() {
    for n in [1000usize, 5000, 20000] {
        let input = fixture::karpenter_shape(n);
        let t = std::time::Instant::now();
        let r = schedule(&input).unwrap();
        let el = t.elapsed();
        println!("{n}: {:?} claims={} unsched={} pack={:?} {:.0} pods/s", el, r.new_nodeclaims.len(), r.unschedulable.len(), packing_efficiency(&input, &r), n as f64 / el.as_secs_f64());
    }
    let input = fixture::existing_nodes_shape(2000, 10000);
    let t = std::time::Instant::now();
    let r = schedule(&input).unwrap();
    println!("existing: {:?} placed={} claims={}", t.elapsed(), r.existing_placements.len(), r.new_nodeclaims.len());
}
