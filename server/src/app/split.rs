//! Weighted traffic splits (`action: split`): each request goes to one target, chosen at
//! random by its percentage, as NGINX Ingress's VirtualServer `splits`.

use std::cell::Cell;

/// A split's targets (`A`, the rules' action type), each with the end of its share in 0..100 (cumulative weights), so
/// a roll picks the first whose end is above it: a target of weight 0 ends where the one
/// before it does, and is never picked.
pub struct Split<A> {
    targets: Vec<(u8, A)>,
}

impl<A> Split<A> {
    /// From (weight, action) pairs whose weights add up to 100, as validation ensures.
    pub fn new(weighted: Vec<(u8, A)>) -> Result<Split<A>, String> {
        let mut end = 0u8;
        let mut targets = Vec::with_capacity(weighted.len());
        for (weight, action) in weighted {
            end = end
                .checked_add(weight)
                .filter(|&e| e <= 100)
                .ok_or("the weights add up to more than 100")?;
            targets.push((end, action));
        }
        if end != 100 {
            return Err(format!(
                "the weights add up to {end}; they must add up to 100"
            ));
        }
        Ok(Split { targets })
    }

    /// The target for `roll` (0 to 99).
    pub fn pick(&self, roll: u8) -> &A {
        let i = self
            .targets
            .iter()
            .position(|(end, _)| roll < *end)
            .unwrap_or(self.targets.len() - 1);
        &self.targets[i].1
    }

    /// The target for this request.
    pub fn choose(&self) -> &A {
        self.pick(roll())
    }

    /// Every target, with its weight, in order.
    pub fn targets(&self) -> impl Iterator<Item = (u8, &A)> {
        let mut start = 0;
        self.targets.iter().map(move |(end, a)| {
            let weight = end - start;
            start = *end;
            (weight, a)
        })
    }
}

thread_local! {
    /// Each thread's xorshift64* state, seeded from the standard library's per-process
    /// random keys, so replicas and restarts do not roll in step.
    static STATE: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        | 1
}

/// A roll in 0..100: xorshift64*, then the high bits scaled, which is uniform to within
/// 100 / 2^32 per value.
fn roll() -> u8 {
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32;
        ((r * 100) >> 32) as u8
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_roll_goes_to_the_target_whose_share_holds_it() {
        let s = Split::new(vec![(90, 401), (0, 402), (10, 403)]).unwrap();
        assert!((0..90).all(|r| *s.pick(r) == 401));
        assert!(
            (90..100).all(|r| *s.pick(r) == 403),
            "a weight of 0 takes nothing"
        );
        let shares: Vec<_> = s.targets().map(|(w, a)| (w, *a)).collect();
        assert_eq!(shares, [(90, 401), (0, 402), (10, 403)]);
        let all = Split::new(vec![(0, 401), (100, 403)]).unwrap();
        assert!((0..100).all(|r| *all.pick(r) == 403));
    }

    #[test]
    fn weights_must_add_up_to_100() {
        let e = |v| Split::new(v).err().unwrap();
        assert_eq!(
            e(vec![(50, 401), (40, 403)]),
            "the weights add up to 90; they must add up to 100"
        );
        assert_eq!(
            e(vec![(90, 401), (90, 403)]),
            "the weights add up to more than 100"
        );
    }

    #[test]
    fn rolls_cover_every_percentage_about_evenly() {
        let mut counts = [0u32; 100];
        for _ in 0..200_000 {
            counts[usize::from(roll())] += 1;
        }
        // 2,000 expected per value; a binomial's standard deviation is about 44.
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(*min > 1_700 && *max < 2_300, "min {min} max {max}");
    }
}
