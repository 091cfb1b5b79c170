use std::hint::black_box;
use std::time::Instant;
const HOLE_BLOCK: usize = 4096;

fn runs_with(data: &[u8], offset: u64, nonzero: impl Fn(&[u8]) -> bool) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    while start < data.len() {
        let to_boundary = HOLE_BLOCK - (offset + start as u64) as usize % HOLE_BLOCK;
        let end = (start + to_boundary).min(data.len());
        if nonzero(&data[start..end]) {
            match runs.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => runs.push((start, end)),
            }
        }
        start = end;
    }
    runs
}
#[inline(never)]
fn bytewise(b: &[u8]) -> bool { b.iter().any(|&x| x != 0) }
#[inline(never)]
fn words64(b: &[u8]) -> bool {
    let mut w = b.chunks_exact(64);
    !(w.all(|w| w.iter().fold(0, |a, &x| a | x) == 0) && w.remainder().iter().all(|&x| x == 0))
}
#[inline(never)]
fn words256(b: &[u8]) -> bool {
    let mut w = b.chunks_exact(256);
    !(w.all(|w| w.iter().fold(0, |a, &x| a | x) == 0) && w.remainder().iter().all(|&x| x == 0))
}
fn main() {
    // 1 MiB chunks: all zeros; half zero blocks; all data (first byte nonzero at the block's end: worst case)
    let mib = 1 << 20;
    let zeros = vec![0u8; mib];
    let mut half = vec![0u8; mib];
    for b in (0..mib).step_by(8192) { half[b + 100] = 1; }
    let mut late = vec![0u8; mib];
    for b in (0..mib).step_by(4096) { late[b + 4095] = 1; }
    let rounds = 7;
    let reps = 400; // 400 MiB per measure
    for (name, data) in [("all-zero", &zeros), ("half-zero", &half), ("data-late", &late)] {
        let r1 = runs_with(data, 0, bytewise); let r2 = runs_with(data, 0, words64); let r3 = runs_with(data, 0, words256);
        assert_eq!(r1, r2); assert_eq!(r1, r3);
        let mut res: Vec<(&str, Vec<f64>)> = vec![("bytewise", vec![]), ("words64", vec![]), ("words256", vec![])];
        for round in 0..rounds {
            let mut order = [0usize, 1, 2];
            // rotate order per round (poor man's shuffle)
            order.rotate_left(round % 3);
            if round % 2 == 1 { order.swap(0, 2); }
            for &i in &order {
                let t = Instant::now();
                for _ in 0..reps {
                    let r = match i { 0 => runs_with(black_box(data), 0, bytewise), 1 => runs_with(black_box(data), 0, words64), _ => runs_with(black_box(data), 0, words256) };
                    black_box(r);
                }
                let gbs = (reps * mib) as f64 / t.elapsed().as_secs_f64() / 1e9;
                res[i].1.push(gbs);
            }
        }
        for (n, mut v) in res { v.sort_by(|a, b| a.partial_cmp(b).unwrap()); println!("{name:10} {n:9} GB/s min {:.2} median {:.2} max {:.2}", v[0], v[v.len()/2], v[v.len()-1]); }
    }
}
