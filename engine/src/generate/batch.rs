//! Assembling one forward step of a left-padded batch: token ids, per-sequence positions and the
//! additive attention mask.

use candle_core::{DType, Device, Tensor};

/// Inputs for one forward step over columns `start..start + t` of a left-padded batch.
pub struct StepInputs {
    /// (b, t) u32 token ids; padding columns hold token 0.
    pub tokens: Tensor,
    /// (b, t) u32 positions: column minus the row's padding (0 on padding).
    pub positions: Tensor,
    /// (b, 1, t, start + t): 0 where a query may attend, -inf elsewhere.
    pub mask: Tensor,
}

/// Builds the step inputs. `rows[i]` gives row i's tokens for these columns, `pads[i]` its number
/// of leading padding columns. A query attends to keys that are not padding, not in its future and
/// (with a sliding window) not older than `window` positions; a padding query attends to itself
/// only, so no row is ever fully masked.
pub fn step_inputs(
    rows: &[Vec<u32>],
    pads: &[usize],
    start: usize,
    window: Option<usize>,
    dtype: DType,
    device: &Device,
) -> candle_core::Result<StepInputs> {
    let b = rows.len();
    let t = rows.first().map_or(0, Vec::len);
    let columns = start + t;
    let mut tokens = Vec::with_capacity(b * t);
    let mut positions = Vec::with_capacity(b * t);
    let mut mask = vec![f32::NEG_INFINITY; b * t * columns];
    for (i, (row, &pad)) in rows.iter().zip(pads).enumerate() {
        for (j, &tok) in row.iter().enumerate() {
            let col = start + j;
            tokens.push(tok);
            positions.push(col.saturating_sub(pad) as u32);
            let line = &mut mask[(i * t + j) * columns..(i * t + j + 1) * columns];
            if col < pad {
                line[col] = 0.0;
                continue;
            }
            let first = match window {
                Some(w) => pad.max((col + 1).saturating_sub(w)),
                None => pad,
            };
            for v in &mut line[first..=col] {
                *v = 0.0;
            }
        }
    }
    Ok(StepInputs {
        tokens: Tensor::from_vec(tokens, (b, t), device)?,
        positions: Tensor::from_vec(positions, (b, t), device)?,
        mask: Tensor::from_vec(mask, (b, 1, t, columns), device)?.to_dtype(dtype)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_hides_padding_and_future() {
        let s = step_inputs(&[vec![0, 5, 6], vec![4, 5, 6]], &[1, 0], 0, None, DType::F32, &Device::Cpu).unwrap();
        let m: Vec<Vec<Vec<f32>>> = s.mask.squeeze(1).unwrap().to_vec3().unwrap();
        let inf = f32::NEG_INFINITY;
        assert_eq!(m[0], vec![vec![0.0, inf, inf], vec![inf, 0.0, inf], vec![inf, 0.0, 0.0]]);
        assert_eq!(m[1], vec![vec![0.0, inf, inf], vec![0.0, 0.0, inf], vec![0.0, 0.0, 0.0]]);
        assert_eq!(s.positions.to_vec2::<u32>().unwrap(), vec![vec![0, 0, 1], vec![0, 1, 2]]);
    }

    #[test]
    fn sliding_window_limits_the_past() {
        let s = step_inputs(&[vec![1]], &[0], 3, Some(2), DType::F32, &Device::Cpu).unwrap();
        let m: Vec<f32> = s.mask.flatten_all().unwrap().to_vec1().unwrap();
        let inf = f32::NEG_INFINITY;
        assert_eq!(m, vec![inf, inf, 0.0, 0.0]);
        assert_eq!(s.positions.to_vec2::<u32>().unwrap(), vec![vec![3]]);
    }
}
