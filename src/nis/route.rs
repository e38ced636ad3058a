//! Path search on the topology: breadth-first search with a link filter, and Yen's K shortest
//! loopless paths by hop count (J. Y. Yen, "Finding the K shortest loopless paths in a
//! network", Management Science 17(11), 1971). Paths are lists of link (edge weight) indices.

use std::collections::VecDeque;

use petgraph::graph::{NodeIndex, UnGraph};
use petgraph::visit::EdgeRef;

/// Fewest-hop path from `from` to `to` using only links for which `usable` is true and
/// avoiding `banned` nodes. Deterministic: neighbours are visited in petgraph adjacency order
/// (most recently added edge first).
pub(crate) fn bfs(
    g: &UnGraph<String, usize>,
    from: NodeIndex,
    to: NodeIndex,
    usable: &mut dyn FnMut(usize) -> bool,
    banned: &[NodeIndex],
) -> Option<Vec<usize>> {
    let mut prev: Vec<Option<(NodeIndex, usize)>> = vec![None; g.node_count()];
    let mut seen = vec![false; g.node_count()];
    for b in banned {
        seen[b.index()] = true;
    }
    seen[from.index()] = true;
    let mut queue = VecDeque::from([from]);
    while let Some(n) = queue.pop_front() {
        if n == to {
            let mut path = Vec::new();
            let mut cur = to;
            while let Some((p, link)) = prev[cur.index()] {
                path.push(link);
                cur = p;
            }
            path.reverse();
            return Some(path);
        }
        for e in g.edges(n) {
            let m = if e.source() == n { e.target() } else { e.source() };
            if !seen[m.index()] && usable(*e.weight()) {
                seen[m.index()] = true;
                prev[m.index()] = Some((n, *e.weight()));
                queue.push_back(m);
            }
        }
    }
    None
}

/// The nodes visited by a path of links starting at `from`.
fn nodes_of(g: &UnGraph<String, usize>, from: NodeIndex, path: &[usize]) -> Vec<NodeIndex> {
    let mut nodes = vec![from];
    for &l in path {
        // Edges were added in link order, so link index == edge index.
        let (a, b) = g.edge_endpoints(petgraph::graph::EdgeIndex::new(l)).expect("path link in graph");
        let cur = *nodes.last().expect("non-empty");
        nodes.push(if a == cur { b } else { a });
    }
    nodes
}

/// Up to `k` loopless paths from `from` to `to`, shortest (fewest hops) first.
pub(crate) fn yen(g: &UnGraph<String, usize>, from: NodeIndex, to: NodeIndex, k: usize) -> Vec<Vec<usize>> {
    let Some(first) = bfs(g, from, to, &mut |_| true, &[]) else { return vec![] };
    let mut found = vec![first];
    let mut candidates: Vec<Vec<usize>> = Vec::new();
    while found.len() < k {
        let prev = found.last().expect("non-empty").clone();
        let prev_nodes = nodes_of(g, from, &prev);
        for i in 0..prev.len() {
            let root = &prev[..i];
            let banned_links: Vec<usize> =
                found.iter().filter(|p| p.len() > i && &p[..i] == root).map(|p| p[i]).collect();
            let banned_nodes = &prev_nodes[..i];
            if let Some(spur) = bfs(g, prev_nodes[i], to, &mut |l| !banned_links.contains(&l), banned_nodes) {
                let mut path = root.to_vec();
                path.extend(spur);
                if !found.contains(&path) && !candidates.contains(&path) {
                    candidates.push(path);
                }
            }
        }
        // The shortest candidate; the earliest found among equals (stable).
        let Some(best) = (0..candidates.len()).min_by_key(|&i| (candidates[i].len(), i)) else { break };
        found.push(candidates.remove(best));
    }
    found
}

/// Static bottleneck capacity of the widest path from `from` to every node (0 when
/// unreachable): the modified Dijkstra of Watashiba's thesis (widest-path metric), over link capacities
/// alone. No reservation can ever need more than this between the two nodes.
pub(crate) fn widest_capacities(g: &UnGraph<String, usize>, capacity: &[u64], from: NodeIndex) -> Vec<u64> {
    let mut best = vec![0u64; g.node_count()];
    best[from.index()] = u64::MAX;
    let mut heap = std::collections::BinaryHeap::from([(u64::MAX, from.index())]);
    while let Some((width, n)) = heap.pop() {
        if width < best[n] {
            continue;
        }
        for e in g.edges(NodeIndex::new(n)) {
            let m = if e.source().index() == n { e.target() } else { e.source() };
            let w = width.min(capacity[*e.weight()]);
            if w > best[m.index()] {
                best[m.index()] = w;
                heap.push((w, m.index()));
            }
        }
    }
    best
}
