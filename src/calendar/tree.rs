//! An augmented treap over the change points of a step function.
//!
//! Each node is one instant `key` with the change `delta` of the function there. Every subtree
//! caches: the sum of its deltas, the max and min running sum over its keys in order (relative
//! to the subtree's start) and the sum of `delta * key` (for integrals). The function's value
//! at `t` is the running sum of all deltas at keys `<= t`.
//!
//! Nodes live in an arena (`Vec`) addressed by `u32`, with a free list, and are laid out in
//! exactly one 64-byte cache line: with 10^6 spans the tree no longer fits in cache, and every
//! level of a descent costs one memory access. Priorities come from a seeded splitmix64
//! stream, so the shape is deterministic for a given sequence of updates. Deltas, sums and
//! running sums are bounded by the calendar's capacity, which the owner keeps below 2^30.

use crate::model::Time;

const NIL: u32 = u32::MAX;
/// Sentinels for "no prefix"; far outside any value of a function bounded by 2^30.
const NEG: i64 = i64::MIN / 4;
const POS: i64 = i64::MAX / 4;

#[derive(Debug, Clone)]
#[repr(C, align(64))]
struct Node {
    key: Time,
    sum: i64,
    max_pref: i64,
    min_pref: i64,
    /// Sum of `delta * key` over the subtree, as an i128 split in two halves (keeps the node
    /// 8-byte aligned and inside one cache line).
    wsum_lo: u64,
    wsum_hi: i64,
    delta: i32,
    prio: u32,
    left: u32,
    right: u32,
}

impl Node {
    fn wsum(&self) -> i128 {
        (i128::from(self.wsum_hi) << 64) | i128::from(self.wsum_lo)
    }
}

/// The augmented treap. See the module docs.
#[derive(Debug, Clone)]
pub(crate) struct ChangeTree {
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
    rng: u64,
}

/// Which running-sum condition a search looks for.
#[derive(Clone, Copy)]
enum Want {
    Above(i64),
    AtMost(i64),
}

/// Exclusive key bounds of a subtree: every key `k` in it has `lo < k < hi`.
#[derive(Clone, Copy)]
struct Bounds {
    lo: Time,
    hi: Time,
}

const ALL: Bounds = Bounds { lo: Time::MIN, hi: Time::MAX };

impl ChangeTree {
    pub(crate) fn new(seed: u64) -> Self {
        ChangeTree { nodes: Vec::new(), free: Vec::new(), root: NIL, rng: seed }
    }

    fn next_prio(&mut self) -> u32 {
        // splitmix64
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 32) as u32
    }

    fn n(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    fn sum(&self, i: u32) -> i64 {
        if i == NIL {
            0
        } else {
            self.n(i).sum
        }
    }

    /// Recomputes node `i`'s aggregates from its children.
    fn pull(&mut self, i: u32) {
        let node = self.n(i);
        let (l, r, key, delta) = (node.left, node.right, node.key, i64::from(node.delta));
        let (mut sum, mut max_pref, mut min_pref, mut wsum) = (0i64, NEG, POS, 0i128);
        if l != NIL {
            let ln = self.n(l);
            (sum, max_pref, min_pref, wsum) = (ln.sum, ln.max_pref, ln.min_pref, ln.wsum());
        }
        sum += delta;
        max_pref = max_pref.max(sum);
        min_pref = min_pref.min(sum);
        wsum += i128::from(delta) * i128::from(key);
        if r != NIL {
            let rn = self.n(r);
            max_pref = max_pref.max(sum + rn.max_pref);
            min_pref = min_pref.min(sum + rn.min_pref);
            sum += rn.sum;
            wsum += rn.wsum();
        }
        let node = &mut self.nodes[i as usize];
        node.sum = sum;
        node.max_pref = max_pref;
        node.min_pref = min_pref;
        node.wsum_lo = wsum as u64;
        node.wsum_hi = (wsum >> 64) as i64;
    }

    fn alloc(&mut self, key: Time, delta: i64) -> u32 {
        let prio = self.next_prio();
        let delta = i32::try_from(delta).expect("delta bounded by MAX_AMOUNT");
        let node =
            Node { key, delta, prio, left: NIL, right: NIL, sum: 0, max_pref: 0, min_pref: 0, wsum_lo: 0, wsum_hi: 0 };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                u32::try_from(self.nodes.len() - 1).expect("fewer than 2^32 change points")
            }
        };
        self.pull(i);
        i
    }

    /// Merges two treaps where every key of `a` is below every key of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.n(a).prio > self.n(b).prio {
            let ar = self.n(a).right;
            let m = self.merge(ar, b);
            self.nodes[a as usize].right = m;
            self.pull(a);
            a
        } else {
            let bl = self.n(b).left;
            let m = self.merge(a, bl);
            self.nodes[b as usize].left = m;
            self.pull(b);
            b
        }
    }

    /// Adds `delta` to the change at `key`, creating or dropping the node as needed.
    pub(crate) fn update(&mut self, key: Time, delta: i64) {
        if delta != 0 {
            self.root = self.update_at(self.root, key, delta);
        }
    }

    fn update_at(&mut self, i: u32, key: Time, delta: i64) -> u32 {
        if i == NIL {
            return self.alloc(key, delta);
        }
        let k = self.n(i).key;
        if key == k {
            let d = i64::from(self.n(i).delta) + delta;
            if d == 0 {
                let (l, r) = (self.n(i).left, self.n(i).right);
                self.free.push(i);
                return self.merge(l, r);
            }
            self.nodes[i as usize].delta = i32::try_from(d).expect("delta bounded by MAX_AMOUNT");
        } else if key < k {
            let c = self.update_at(self.n(i).left, key, delta);
            self.nodes[i as usize].left = c;
            if c != NIL && self.n(c).prio > self.n(i).prio {
                // rotate right
                self.nodes[i as usize].left = self.n(c).right;
                self.pull(i);
                self.nodes[c as usize].right = i;
                self.pull(c);
                return c;
            }
        } else {
            let c = self.update_at(self.n(i).right, key, delta);
            self.nodes[i as usize].right = c;
            if c != NIL && self.n(c).prio > self.n(i).prio {
                // rotate left
                self.nodes[i as usize].right = self.n(c).left;
                self.pull(i);
                self.nodes[c as usize].left = i;
                self.pull(c);
                return c;
            }
        }
        self.pull(i);
        i
    }

    /// Sum of the deltas at keys `<= t` and of `delta * key` over the same keys.
    fn prefix_sums(&self, t: Time) -> (i64, i128) {
        let (mut s, mut w) = (0i64, 0i128);
        let mut i = self.root;
        while i != NIL {
            let node = self.n(i);
            if node.key <= t {
                if node.left != NIL {
                    s += self.n(node.left).sum;
                    w += self.n(node.left).wsum();
                }
                s += i64::from(node.delta);
                w += i128::from(node.delta) * i128::from(node.key);
                i = node.right;
            } else {
                i = node.left;
            }
        }
        (s, w)
    }

    /// Value of the step function at `t`: sum of deltas at keys `<= t`.
    pub(crate) fn prefix(&self, t: Time) -> i64 {
        let mut s = 0i64;
        let mut i = self.root;
        while i != NIL {
            let node = self.n(i);
            if node.key <= t {
                s += self.sum(node.left) + i64::from(node.delta);
                i = node.right;
            } else {
                i = node.left;
            }
        }
        s
    }

    /// The change points with keys in `(lo, hi)`, in key order, each with its delta. O(log n + k)
    /// for the k points listed.
    pub(crate) fn changes_between(&self, lo: Time, hi: Time) -> Vec<(Time, i64)> {
        let mut out = Vec::new();
        self.collect(self.root, lo, hi, &mut out);
        out
    }

    fn collect(&self, i: u32, lo: Time, hi: Time, out: &mut Vec<(Time, i64)>) {
        if i == NIL {
            return;
        }
        let node = self.n(i);
        if node.key > lo {
            self.collect(node.left, lo, hi, out);
        }
        if lo < node.key && node.key < hi {
            out.push((node.key, i64::from(node.delta)));
        }
        if node.key < hi {
            self.collect(node.right, lo, hi, out);
        }
    }

    /// Integral of the function over `(-inf, t)`: `sum_{k <= t} delta_k * (t - k)`.
    pub(crate) fn integral_to(&self, t: Time) -> i128 {
        let (s, w) = self.prefix_sums(t);
        i128::from(s) * i128::from(t) - w
    }

    /// Max of the function's value at the change points with keys in `[lo, hi]`, if any.
    pub(crate) fn range_max_prefix(&self, lo: Time, hi: Time) -> Option<i64> {
        if lo > hi {
            return None;
        }
        let m = self.range_max(self.root, ALL, lo, hi, 0);
        (m > NEG / 2).then_some(m)
    }

    fn range_max(&self, i: u32, b: Bounds, lo: Time, hi: Time, base: i64) -> i64 {
        if i == NIL || b.hi <= lo || b.lo >= hi {
            return NEG;
        }
        let node = self.n(i);
        if b.lo >= lo - 1 && b.hi <= hi.saturating_add(1) {
            return base + node.max_pref;
        }
        let mut best = self.range_max(node.left, Bounds { lo: b.lo, hi: node.key }, lo, hi, base);
        let at = base + self.sum(node.left) + i64::from(node.delta);
        if (lo..=hi).contains(&node.key) {
            best = best.max(at);
        }
        best.max(self.range_max(node.right, Bounds { lo: node.key, hi: b.hi }, lo, hi, at))
    }

    /// First change point `k >= from` where the function's value is `> threshold`.
    pub(crate) fn first_above(&self, from: Time, threshold: i64) -> Option<Time> {
        self.first_where(self.root, ALL, from, 0, Want::Above(threshold))
    }

    /// First change point `k >= from` where the function's value is `<= threshold`.
    pub(crate) fn first_at_most(&self, from: Time, threshold: i64) -> Option<Time> {
        self.first_where(self.root, ALL, from, 0, Want::AtMost(threshold))
    }

    fn first_where(&self, i: u32, b: Bounds, from: Time, base: i64, want: Want) -> Option<Time> {
        if i == NIL || b.hi <= from {
            return None;
        }
        let node = self.n(i);
        let possible = match want {
            Want::Above(th) => base + node.max_pref > th,
            Want::AtMost(th) => base + node.min_pref <= th,
        };
        if !possible {
            return None;
        }
        let at = base + self.sum(node.left) + i64::from(node.delta);
        if node.key >= from {
            if let Some(k) = self.first_where(node.left, Bounds { lo: b.lo, hi: node.key }, from, base, want) {
                return Some(k);
            }
            let hit = match want {
                Want::Above(th) => at > th,
                Want::AtMost(th) => at <= th,
            };
            if hit {
                return Some(node.key);
            }
        }
        self.first_where(node.right, Bounds { lo: node.key, hi: b.hi }, from, at, want)
    }

    /// Number of change points (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.nodes.len() - self.free.len()
    }
}

#[cfg(test)]
#[test]
fn node_fills_exactly_one_cache_line() {
    assert_eq!(std::mem::size_of::<Node>(), 64);
}
