//! Python's float rounding and exact summation.

/// Python `round(x)` for a float: round half to even, as an integral float.
pub fn py_round(x: f64) -> f64 {
    x.round_ties_even()
}

/// Python `round(x, ndigits)` for a float: correctly rounded, half to even on the exact
/// binary value, returned as the nearest float.
///
/// Rust's `{:.N}` formatting rounds the exact decimal expansion half to even, which is
/// what CPython's `round` does through `_Py_dg_dtoa`.
pub fn py_round_digits(x: f64, ndigits: usize) -> f64 {
    if !x.is_finite() {
        return x;
    }
    format!("{x:.ndigits$}").parse().unwrap_or(x)
}

/// Python `math.fsum`: the correctly rounded sum of the values (Shewchuk's partials).
pub fn fsum(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut partials: Vec<f64> = Vec::new();
    for mut x in values {
        let mut kept = 0;
        for i in 0..partials.len() {
            let mut y = partials[i];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                partials[kept] = lo;
                kept += 1;
            }
            x = hi;
        }
        partials.truncate(kept);
        partials.push(x);
    }
    // Sum from the top, then correct the last rounding half-way case as CPython does.
    let Some(mut hi) = partials.pop() else { return 0.0 };
    let mut lo = 0.0;
    while let Some(y) = partials.pop() {
        let x = hi;
        hi = x + y;
        let yr = hi - x;
        lo = y - yr;
        if lo != 0.0 {
            break;
        }
    }
    if let Some(&next) = partials.last() {
        if (lo < 0.0 && next < 0.0) || (lo > 0.0 && next > 0.0) {
            let y = lo * 2.0;
            let x = hi + y;
            if y == x - hi {
                hi = x;
            }
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_is_half_even() {
        assert_eq!(py_round(62.5), 62.0);
        assert_eq!(py_round(63.5), 64.0);
        assert_eq!(py_round(-0.5), -0.0);
    }

    #[test]
    fn round_digits_matches_python() {
        // Values checked against CPython 3.11.
        assert_eq!(py_round_digits(0.125, 2), 0.12);
        assert_eq!(py_round_digits(0.375, 2), 0.38);
        assert_eq!(py_round_digits(2.675, 2), 2.67);
        assert_eq!(py_round_digits(71.876, 2), 71.88);
        assert_eq!(py_round_digits(39.6, 2), 39.6);
        assert_eq!(py_round_digits(2.5, 0), 2.0);
    }

    #[test]
    fn fsum_is_exact() {
        assert_eq!(fsum([0.1; 10]), 1.0);
        assert_eq!(fsum([1e100, 1.0, -1e100, 1e-100, 1e50, -1.0, -1e50]), 1e-100);
        assert_eq!(fsum([]), 0.0);
        assert_eq!(fsum([1.0, 1e-16, 1e-16]), 1.0000000000000002);
    }
}
