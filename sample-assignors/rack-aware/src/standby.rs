//! Standbys: the sticky placement improved by pairwise swaps that cut cross-rack reads.
//!
//! A swap exchanges the standbys of two members (task `a` on member `x`, task `b` on member
//! `y` become `a` on `y`, `b` on `x`), so every member keeps its standby count and the balance
//! the sticky pass reached. A swap is made only if it lowers the total cross-rack partitions,
//! keeps each task off the process of its active and of its other standbys, and — with
//! `rackAwareAssignmentTags` — only between members with identical tag values, so no task's
//! tag diversity changes.

use std::collections::BTreeMap;

use assignor_sdk::GroupSpec;

use crate::Holders;
use crate::racks::Racks;

/// How many willing standbys (see `willing` below) of a candidate rack one standby examines
/// for a partner, and then how many others. Bounds a pass at `O(S·R·(SCAN + SCAN_ANY))` for
/// `S` standbys and `R` racks.
const SCAN: usize = 64;
/// See [`SCAN`].
const SCAN_ANY: usize = 16;

/// Passes over all standbys at most; each pass but the last makes at least one swap.
const PASSES: usize = 32;

/// Improves `holders` (per dense task, the members holding it as standby) in place; returns
/// the number of swaps made.
pub(crate) fn improve(
    group: &GroupSpec,
    racks: &Racks,
    owner: &[u32],
    holders: &mut Holders,
) -> usize {
    let process = intern(
        group
            .members
            .iter()
            .map(|m| vec![Some(m.process_id.as_str())]),
    );
    let tags = &group.configs.rack_aware_assignment_tags;
    let class = intern(group.members.iter().map(|m| {
        tags.iter()
            .map(|k| m.client_tags.get(k).map(String::as_str))
            .collect()
    }));
    let rack = &racks.member_rack;

    // Whether `to` may hold task `t` in place of `from`.
    let fits = |holders: &Holders, t: u32, from: u32, to: u32| {
        let p = process[to as usize];
        process[owner[t as usize] as usize] != p
            && holders
                .of(t as usize)
                .iter()
                .all(|&h| h == from || process[h as usize] != p)
    };

    let r = racks.count;
    let mut swaps = 0;
    let mut targets: Vec<u32> = Vec::with_capacity(r);
    // The indexes below are rebuilt every pass into buffers allocated once.
    let mut placements: Vec<(u32, u32)> = Vec::new();
    let mut bucket: Vec<Vec<u32>> = vec![Vec::new(); r];
    let mut slot: Vec<usize> = Vec::new();
    let mut willing: Vec<Vec<u32>> = vec![Vec::new(); r * r];
    let mut head = vec![0usize; r * r];
    for _ in 0..PASSES {
        let before = swaps;
        // Placements (task, member) and, per rack, the placements held there, rebuilt in a
        // canonical order each pass: a pass then depends only on the placement, so a pass
        // that finds nothing finds nothing again when this output comes back as input.
        placements.clear();
        for t in 0..holders.tasks() {
            let h = holders.of_mut(t);
            h.sort_unstable();
            placements.extend(h.iter().map(|&m| (t as u32, m)));
        }
        bucket.iter_mut().for_each(Vec::clear);
        slot.clear();
        slot.resize(placements.len(), 0);
        for (p, &(_, m)) in (0u32..).zip(&placements) {
            let b = &mut bucket[rack[m as usize] as usize];
            slot[p as usize] = b.len();
            b.push(p);
        }
        // Per (rack y, rack x): placements in y whose task reads no more across racks from x.
        // Swapping one of them against a standby that gains by moving to y always pays, so
        // they are tried first (entries go stale when their placement moves; skipped).
        willing.iter_mut().for_each(Vec::clear);
        // Per list, the first entry that may still be fresh.
        head.fill(0);
        for (p, &(b, m)) in (0u32..).zip(&placements) {
            let ry = rack[m as usize];
            for rx in (0..r as u32).filter(|&rx| rx != ry) {
                if racks.miss(b as usize, rx) <= racks.miss(b as usize, ry) {
                    willing[ry as usize * r + rx as usize].push(p);
                }
            }
        }
        for p in 0..placements.len() {
            let (a, x) = placements[p];
            let rx = rack[x as usize];
            let here = racks.miss(a as usize, rx);
            if here == 0 {
                continue;
            }
            targets.clear();
            targets.extend((0..r as u32).filter(|&ry| racks.miss(a as usize, ry) < here));
            targets.sort_by_key(|&ry| (racks.miss(a as usize, ry), ry));
            for &ry in &targets {
                let list = ry as usize * r + rx as usize;
                let fresh = |&q: &u32| rack[placements[q as usize].1 as usize] == ry;
                while head[list] < willing[list].len() && !fresh(&willing[list][head[list]]) {
                    head[list] += 1;
                }
            }
            let partner = targets.iter().find_map(|&ry| {
                let saving = here - racks.miss(a as usize, ry);
                let list = ry as usize * r + rx as usize;
                let preferred = willing[list][head[list]..].iter().take(SCAN);
                let any = bucket[ry as usize].iter().take(SCAN_ANY);
                preferred.chain(any).copied().find(|&q| {
                    let (b, y) = placements[q as usize];
                    b != a
                        && rack[y as usize] == ry
                        && class[x as usize] == class[y as usize]
                        && racks.miss(b as usize, rx) < racks.miss(b as usize, ry) + saving
                        && fits(holders, a, x, y)
                        && fits(holders, b, y, x)
                })
            });
            let Some(q) = partner else { continue };
            let (b, y) = placements[q as usize];
            let ry = rack[y as usize];
            for (t, from, to) in [(a, x, y), (b, y, x)] {
                for h in holders
                    .of_mut(t as usize)
                    .iter_mut()
                    .filter(|h| **h == from)
                {
                    *h = to;
                }
            }
            placements[p] = (a, y);
            placements[q as usize] = (b, x);
            let (sp, sq) = (slot[p], slot[q as usize]);
            bucket[rx as usize][sp] = q;
            bucket[ry as usize][sq] = p as u32;
            slot.swap(p, q as usize);
            swaps += 1;
        }
        if swaps == before {
            break;
        }
    }
    swaps
}

/// Dense ids for equal keys, per item.
fn intern<'a>(keys: impl Iterator<Item = Vec<Option<&'a str>>>) -> Vec<u32> {
    let mut ids: BTreeMap<Vec<Option<&'a str>>, u32> = BTreeMap::new();
    keys.map(|k| {
        let next = ids.len() as u32;
        *ids.entry(k).or_insert(next)
    })
    .collect()
}
