//! Where a change's time goes, read from the control plane's audit log: each change is the bench's write of a
//! component, the controller's requests while it reacted, its status write, and the bench seeing the status. The
//! phases say which part of the path is slow (the API server answering, the controller noticing, the controller's
//! pass, the status reaching a watcher), which one figure from end to end cannot.

use std::time::{Duration, Instant};

use kube_emulator::audit::Record;

/// One change as the bench saw it: when it started writing, when it saw the status, and whose status.
pub struct Window {
    pub started: Instant,
    pub ended: Instant,
    pub operator: String,
}

/// The phases of one change, when the audit log holds both its component write and the controller's status write.
struct Phases {
    write: Duration,
    noticed: Duration,
    pass: Duration,
    status_write: Duration,
    seen: Duration,
    requests: usize,
}

/// One phase of a change, as a column of the printout.
type Phase = fn(&Phases) -> Duration;

fn received(record: &Record) -> Instant {
    record.received.unwrap_or_else(Instant::now)
}

/// The phases of the change in `window`: `component` picks the bench's write, `status` the controller's status
/// write, `controller` every request of the controller.
fn phases(
    records: &[&Record],
    window: &Window,
    component: impl Fn(&Record) -> bool,
    status: impl Fn(&Record) -> bool,
    controller: impl Fn(&Record) -> bool,
) -> Option<Phases> {
    // By arrival: the log is in the order requests were answered.
    let mut inside: Vec<&Record> = records
        .iter()
        .copied()
        .filter(|r| r.received.is_some_and(|at| at >= window.started && at <= window.ended))
        .collect();
    inside.sort_by_key(|r| received(r));
    let write = inside.iter().find(|r| component(r))?;
    let written = received(write) + write.took;
    // From the write's arrival: the controller may hear of it before its answer is sent.
    let ours: Vec<&Record> =
        inside.iter().copied().filter(|r| controller(r) && received(r) >= received(write)).collect();
    let first = ours.first()?;
    let status = ours.iter().rev().find(|r| status(r) && r.name == window.operator)?;
    let status_written = received(status) + status.took;
    Some(Phases {
        write: write.took,
        noticed: received(first).saturating_duration_since(written),
        pass: received(status).saturating_duration_since(received(first)),
        status_write: status.took,
        seen: window.ended.saturating_duration_since(status_written),
        requests: ours.iter().filter(|r| received(r) <= received(status)).count(),
    })
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * fraction).round() as usize]
}

/// Prints each phase's median and p99 over `windows`, and the requests of the slowest change in order.
pub fn print(
    records: &[Record],
    windows: &[Window],
    component: impl Fn(&Record) -> bool + Copy,
    status: impl Fn(&Record) -> bool + Copy,
    controller: impl Fn(&Record) -> bool + Copy,
) {
    let records: Vec<&Record> = records.iter().filter(|r| r.received.is_some()).collect();
    let all: Vec<Phases> = windows.iter().filter_map(|w| phases(&records, w, component, status, controller)).collect();
    if all.is_empty() {
        println!("  phases: no change found whole in the audit log");
        return;
    }
    println!("  phases of {} of {} changes (median, p99):", all.len(), windows.len());
    let columns: [(&str, Phase); 5] = [
        ("the API server answers the component's write", |p| p.write),
        ("the controller's first request after it", |p| p.noticed),
        ("from there to the Operator's status write", |p| p.pass),
        ("the API server answers the status write", |p| p.status_write),
        ("the bench's watch shows the status", |p| p.seen),
    ];
    for (what, of) in columns {
        let mut figures: Vec<Duration> = all.iter().map(of).collect();
        figures.sort();
        println!("    {what}: {:.1?}, {:.1?}", percentile(&figures, 0.5), percentile(&figures, 0.99));
    }
    let mut requests: Vec<usize> = all.iter().map(|p| p.requests).collect();
    requests.sort_unstable();
    println!(
        "    controller requests until the status write (median, max): {}, {}",
        requests[requests.len() / 2],
        requests[requests.len() - 1]
    );
    let slowest = windows.iter().max_by_key(|w| w.ended - w.started).expect("a change");
    println!("  the slowest change ({:.1?}), every request in it:", slowest.ended - slowest.started);
    let mut listed: Vec<&&Record> =
        records.iter().filter(|r| received(r) >= slowest.started && received(r) <= slowest.ended).collect();
    listed.sort_by_key(|r| received(r));
    for record in listed {
        println!(
            "    +{:>7.1?} {:>7.1?} {} {} {}/{} {} {} {}",
            received(record) - slowest.started,
            record.took,
            if controller(record) { "controller" } else { "other" },
            record.verb,
            record.resource,
            record.subresource,
            record.namespace,
            record.name,
            record.code
        );
    }
}
