//! Assembling one forward step of a left-padded batch: token ids, per-sequence positions and the
//! additive attention mask.

use candle_core::{DType, Device, Tensor};

use crate::config::Windows;

/// Inputs for one forward step over columns `start..start + t` of a left-padded batch.
pub struct StepInputs {
    /// (b, t) u32 token ids; padding columns hold token 0.
    pub tokens: Tensor,
    /// (b, t) u32 positions: column minus the row's padding (0 on padding).
    pub positions: Tensor,
    /// (b, 1, t, start + t): 0 where a query may attend, -inf elsewhere.
    pub mask: Tensor,
    /// The same for a model's local sliding-window layers, when it has them.
    pub local_mask: Option<Tensor>,
}

/// Builds the step inputs. `rows[i]` gives row i's tokens for these columns, `pads[i]` its number
/// of leading padding columns. A query attends to keys that are not padding, not in its future and
/// (with a sliding window) not older than the window; a padding query attends to itself only, so
/// no row is ever fully masked. `windows.local` adds the mask of local layers.
pub fn step_inputs(
    rows: &[Vec<u32>],
    pads: &[usize],
    start: usize,
    windows: Windows,
    dtype: DType,
    device: &Device,
) -> candle_core::Result<StepInputs> {
    let b = rows.len();
    let t = rows.first().map_or(0, Vec::len);
    let mut tokens = Vec::with_capacity(b * t);
    let mut positions = Vec::with_capacity(b * t);
    for (row, &pad) in rows.iter().zip(pads) {
        for (j, &tok) in row.iter().enumerate() {
            tokens.push(tok);
            positions.push((start + j).saturating_sub(pad) as u32);
        }
    }
    let local_mask = match windows.local {
        Some(w) => Some(additive_mask(b, t, pads, start, Some(w), dtype, device)?),
        None => None,
    };
    Ok(StepInputs {
        tokens: Tensor::from_vec(tokens, (b, t), device)?,
        positions: Tensor::from_vec(positions, (b, t), device)?,
        mask: additive_mask(b, t, pads, start, windows.all, dtype, device)?,
        local_mask,
    })
}

/// (b, 1, t, start + t): 0 where a query may attend within `window`, -inf elsewhere.
fn additive_mask(
    b: usize,
    t: usize,
    pads: &[usize],
    start: usize,
    window: Option<usize>,
    dtype: DType,
    device: &Device,
) -> candle_core::Result<Tensor> {
    let columns = start + t;
    let mut mask = vec![f32::NEG_INFINITY; b * t * columns];
    for (i, &pad) in pads.iter().enumerate().take(b) {
        for j in 0..t {
            let col = start + j;
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
    Tensor::from_vec(mask, (b, 1, t, columns), device)?.to_dtype(dtype)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_hides_padding_and_future() {
        let s = step_inputs(&[vec![0, 5, 6], vec![4, 5, 6]], &[1, 0], 0, Windows::default(), DType::F32, &Device::Cpu).unwrap();
        assert!(s.local_mask.is_none());
        let m: Vec<Vec<Vec<f32>>> = s.mask.squeeze(1).unwrap().to_vec3().unwrap();
        let inf = f32::NEG_INFINITY;
        assert_eq!(m[0], vec![vec![0.0, inf, inf], vec![inf, 0.0, inf], vec![inf, 0.0, 0.0]]);
        assert_eq!(m[1], vec![vec![0.0, inf, inf], vec![0.0, 0.0, inf], vec![0.0, 0.0, 0.0]]);
        assert_eq!(s.positions.to_vec2::<u32>().unwrap(), vec![vec![0, 0, 1], vec![0, 1, 2]]);
    }

    #[test]
    fn sliding_window_limits_the_past() {
        let s = step_inputs(&[vec![1]], &[0], 3, Windows { all: Some(2), local: None }, DType::F32, &Device::Cpu).unwrap();
        let m: Vec<f32> = s.mask.flatten_all().unwrap().to_vec1().unwrap();
        let inf = f32::NEG_INFINITY;
        assert_eq!(m, vec![inf, inf, 0.0, 0.0]);
        assert_eq!(s.positions.to_vec2::<u32>().unwrap(), vec![vec![3]]);
    }

    /// Local layers get their own window over the same padding; the ordinary mask keeps the whole past.
    #[test]
    fn local_layers_get_their_own_window() {
        let windows = Windows { all: None, local: Some(2) };
        let s = step_inputs(&[vec![0, 7, 8, 9]], &[1], 0, windows, DType::F32, &Device::Cpu).unwrap();
        let inf = f32::NEG_INFINITY;
        let global: Vec<Vec<f32>> = s.mask.squeeze(0).unwrap().squeeze(0).unwrap().to_vec2().unwrap();
        let local: Vec<Vec<f32>> = s.local_mask.unwrap().squeeze(0).unwrap().squeeze(0).unwrap().to_vec2().unwrap();
        assert_eq!(global[3], vec![inf, 0.0, 0.0, 0.0]);
        assert_eq!(local[3], vec![inf, inf, 0.0, 0.0]);
        assert_eq!(local[0], vec![0.0, inf, inf, inf], "a padding query still sees itself");
    }
}
