//! How the lexical and the semantic rankings become one: reciprocal-rank fusion. Each list
//! gives an entry `weight / (k + rank)` (rank from 1), and the entries are sorted by the sum.
//! Ranks, not scores, so BM25's unbounded scores and cosine's narrow band need no
//! calibration against each other; an entry found by both lists beats one found by either,
//! and one found by only one list still competes. Schemas and guides are not embedded: they
//! rank by their lexical place alone.

use super::entries::Entry;

/// The fusion's constants; the defaults are what measured best on the evaluation sets that
/// were written before the semantic ranker (`tests/eval/*-fresh2.json` and older), never on
/// the blind sets it is reported on.
#[derive(Debug, Clone, Copy)]
pub struct Fusion {
    /// Damps the difference between neighbouring ranks (larger: flatter).
    pub k: f32,
    /// The semantic list's weight against the lexical list's 1.
    pub semantic_weight: f32,
    /// Candidates taken from each list.
    pub candidates: usize,
}

impl Default for Fusion {
    fn default() -> Self {
        Self {
            k: 10.0,
            semantic_weight: 0.5,
            candidates: 40,
        }
    }
}

impl Fusion {
    /// The fused ranking of `lexical` (entries, best first) and `semantic` (operation
    /// indexes, best first), best first, with the fused score.
    pub fn fuse(&self, lexical: &[Entry], semantic: &[usize]) -> Vec<(Entry, f32)> {
        let mut scored: Vec<(Entry, f32)> = Vec::with_capacity(lexical.len() + semantic.len());
        let mut add = |entry: Entry, score: f32| match scored.iter_mut().find(|(e, _)| *e == entry)
        {
            Some((_, total)) => *total += score,
            None => scored.push((entry, score)),
        };
        for (rank, entry) in lexical.iter().enumerate() {
            add(*entry, 1.0 / (self.k + rank as f32 + 1.0));
        }
        for (rank, operation) in semantic.iter().enumerate() {
            add(
                Entry::Operation(*operation),
                self.semantic_weight / (self.k + rank as f32 + 1.0),
            );
        }
        // Stable: ties keep the lexical order.
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_both_lists_rank_beats_the_top_of_either_alone() {
        let fusion = Fusion::default();
        let lexical = [Entry::Operation(1), Entry::Operation(2), Entry::Schema(0)];
        let semantic = [2, 3];
        let fused: Vec<Entry> = fusion
            .fuse(&lexical, &semantic)
            .into_iter()
            .map(|(e, _)| e)
            .collect();
        // 2: 1/12 + 0.5/11, 1: 1/11, the schema: 1/13, 3: 0.5/12.
        assert_eq!(
            fused,
            [
                Entry::Operation(2),
                Entry::Operation(1),
                Entry::Schema(0),
                Entry::Operation(3)
            ]
        );
    }

    #[test]
    fn without_a_semantic_list_the_lexical_order_stands() {
        let lexical = [Entry::Guide(4), Entry::Operation(0), Entry::Schema(1)];
        let fused: Vec<Entry> = Fusion::default()
            .fuse(&lexical, &[])
            .into_iter()
            .map(|(e, _)| e)
            .collect();
        assert_eq!(fused, lexical);
    }
}
