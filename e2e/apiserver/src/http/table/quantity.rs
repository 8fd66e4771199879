//! A resource quantity as `resource.Quantity.String()` prints it: the text given when it was already canonical,
//! else the canonical form (`1024Mi` is `1Gi`, `1.5` is `1500m`, `1000` is `1k`). Objects here keep quantities as
//! written, where kube-apiserver's decoding parses them, so the capacity cells canonicalize them.

/// Decimal SI suffixes by power of ten.
const DECIMAL: [(&str, i32); 10] =
    [("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18)];
/// Binary SI suffixes by power of two.
const BINARY: [(&str, u32); 6] = [("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60)];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalSi,
    DecimalExponent,
    BinarySi,
}

/// `Quantity.String()` of `text`; `None` when it is no quantity (kube-apiserver would not have decoded it).
pub fn quantity(text: &str) -> Option<String> {
    if text == "0" {
        return Some(text.to_owned());
    }
    let (negative, num, denom, suffix) = split(text)?;
    let (format, exponent) = interpret(suffix)?;
    if reused(format, exponent, num, denom) {
        return Some(text.to_owned());
    }
    // The value is `mantissa * 10^scale`, exactly.
    let digits = format!("{num}{denom}");
    let mut mantissa: u128 = digits.parse().ok()?;
    let mut scale = -i32::try_from(denom.len()).ok()?;
    match format {
        Format::BinarySi => mantissa = mantissa.checked_mul(1u128.checked_shl(u32::try_from(exponent).ok()?)?)?,
        _ => scale += exponent,
    }
    // Parsing rounds anything finer than a nano unit up to one.
    if scale < -9 {
        let divisor = 10u128.checked_pow(u32::try_from(-9 - scale).ok()?)?;
        mantissa = mantissa.div_ceil(divisor);
        scale = -9;
    }
    if mantissa == 0 {
        return Some("0".to_owned());
    }
    let sign = if negative { "-" } else { "" };
    let integer = integer_value(mantissa, scale);
    let format = match (format, integer) {
        // Binary form only for whole values of at least 1024 (below, or with a fraction, decimal is exact).
        (Format::BinarySi, Some(value)) if value >= 1024 => Format::BinarySi,
        (Format::BinarySi, _) => Format::DecimalSi,
        (other, _) => other,
    };
    if format == Format::BinarySi {
        let mut value = integer?.min(i64::MAX.unsigned_abs().into());
        let mut power = 0;
        while value >= 1024 && value.is_multiple_of(1024) {
            value /= 1024;
            power += 10;
        }
        let suffix = BINARY.iter().find(|(_, p)| *p == power).map_or("", |(s, _)| *s);
        return Some(format!("{sign}{value}{suffix}"));
    }
    while mantissa.is_multiple_of(10) {
        mantissa /= 10;
        scale += 1;
    }
    // The exponent written is a multiple of three, the mantissa a whole number.
    while scale.rem_euclid(3) != 0 {
        mantissa = mantissa.checked_mul(10)?;
        scale -= 1;
    }
    let suffix = match format {
        Format::DecimalExponent if scale == 0 => String::new(),
        Format::DecimalExponent => format!("e{scale}"),
        // Go writes no suffix for a power of ten it has no name for.
        _ => DECIMAL.iter().find(|(_, p)| *p == scale).map_or("", |(s, _)| *s).to_owned(),
    };
    Some(format!("{sign}{mantissa}{suffix}"))
}

/// `mantissa * 10^scale` when it is a whole number.
fn integer_value(mantissa: u128, scale: i32) -> Option<u128> {
    if scale >= 0 {
        return mantissa.checked_mul(10u128.checked_pow(scale.unsigned_abs())?);
    }
    let divisor = 10u128.checked_pow(scale.unsigned_abs())?;
    mantissa.is_multiple_of(divisor).then_some(mantissa / divisor)
}

/// The sign, the whole digits (leading zeros dropped, `0` when none), the fraction digits and the suffix.
fn split(text: &str) -> Option<(bool, &str, &str, &str)> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let rest = rest.trim_start_matches('0');
    let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let end = digits(rest);
    let num = if end == 0 { "0" } else { &rest[..end] };
    let mut rest = &rest[end..];
    let mut denom = "";
    if let Some(fraction) = rest.strip_prefix('.') {
        let end = digits(fraction);
        denom = &fraction[..end];
        rest = &fraction[end..];
    }
    // A suffix is letters of the SI and exponent forms, then an optionally signed number.
    let letters = rest.find(|c: char| !"eEinumkKMGTP".contains(c)).unwrap_or(rest.len());
    let after = rest[letters..].strip_prefix(['-', '+']).unwrap_or(&rest[letters..]);
    if !after.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((negative, num, denom, rest))
}

fn interpret(suffix: &str) -> Option<(Format, i32)> {
    if let Some((_, power)) = DECIMAL.iter().find(|(s, _)| *s == suffix) {
        return Some((Format::DecimalSi, *power));
    }
    if let Some((_, power)) = BINARY.iter().find(|(s, _)| *s == suffix) {
        return Some((Format::BinarySi, i32::try_from(*power).ok()?));
    }
    let exponent = suffix.strip_prefix(['e', 'E']).filter(|e| !e.is_empty())?;
    Some((Format::DecimalExponent, exponent.parse().ok()?))
}

/// Whether `ParseQuantity` keeps the text it parsed, as it does for a small value already in canonical form (and,
/// as Go does not check, with a sign or leading zeros kept).
fn reused(format: Format, exponent: i32, num: &str, denom: &str) -> bool {
    let length = i32::try_from(num.len() + denom.len()).unwrap_or(i32::MAX);
    match format {
        Format::BinarySi => {
            if exponent < 0 || !denom.is_empty() {
                return false;
            }
            // Go's estimate of the decimal digits the value needs.
            let precision = 15 - length - (exponent * 3 / 10) - 1;
            let Ok(value) = num.parse::<i64>() else { return false };
            precision >= 0
                && value.checked_mul(1i64 << exponent.clamp(0, 62)).is_some()
                && exponent % 10 == 0
                && value & 0x07 != 0
        }
        _ => {
            let scale = exponent - i32::try_from(denom.len()).unwrap_or(i32::MAX);
            let shifted = format!("{num}{denom}");
            18 - length >= 0
                && scale >= -9
                && shifted.parse::<i64>().is_ok()
                && scale % 3 == 0
                && !shifted.ends_with("000")
                && !shifted.starts_with('0')
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_print_in_canonical_form() {
        let cases = [
            ("0", "0"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("1.5", "1500m"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("1000m", "1"),
            ("100m", "100m"),
            ("0.1", "100m"),
            ("12e6", "12e6"),
            ("1.5e3", "1500"),
            ("1000k", "1M"),
            ("5G", "5G"),
            ("512", "512"),
            ("100Ki", "100Ki"),
            ("8Ki", "8Ki"),
            ("1Ki", "1Ki"),
            ("0.5Ki", "512"),
            ("0.0000000001", "1n"),
            ("0Gi", "0"),
            ("Gi", "0"),
            ("-1Gi", "-1Gi"),
            ("01", "01"),
        ];
        for (given, printed) in cases {
            assert_eq!(quantity(given).as_deref(), Some(printed), "{given}");
        }
        for invalid in ["", "1x", "1e", "1K", "1.5.5"] {
            assert_eq!(quantity(invalid), None, "{invalid}");
        }
    }
}
