//! Element symbols and the facts a job needs about each element.

/// Symbols of the elements H to Kr, by atomic number (index 0 is Z = 1).
const SYMBOLS: [&str; 36] = [
    "H", "He", "Li", "Be", "B", "C", "N", "O", "F", "Ne", "Na", "Mg", "Al", "Si", "P", "S", "Cl",
    "Ar", "K", "Ca", "Sc", "Ti", "V", "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Zn", "Ga", "Ge", "As",
    "Se", "Br", "Kr",
];

/// The atomic number of an element symbol (any case), or of a number written as such.
pub fn atomic_number(symbol: &str) -> Option<u32> {
    if let Ok(z) = symbol.parse::<u32>() {
        return (1..=SYMBOLS.len() as u32).contains(&z).then_some(z);
    }
    SYMBOLS
        .iter()
        .position(|s| s.eq_ignore_ascii_case(symbol))
        .map(|i| i as u32 + 1)
}

/// The symbol of atomic number `z`.
pub fn symbol(z: u32) -> &'static str {
    SYMBOLS
        .get((z as usize).wrapping_sub(1))
        .copied()
        .unwrap_or("?")
}

/// Core orbitals a frozen-core calculation leaves uncorrelated: the closed shells below the
/// valence shell (1s for Li–Ne; 1s2s2p for Na–Ar; up to 3p for K–Kr).
pub fn core_orbitals(z: u32) -> usize {
    match z {
        0..=2 => 0,
        3..=10 => 1,
        11..=18 => 5,
        _ => 9,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_and_numbers() {
        assert_eq!(atomic_number("O"), Some(8));
        assert_eq!(atomic_number("cl"), Some(17));
        assert_eq!(atomic_number("CL"), Some(17));
        assert_eq!(atomic_number("8"), Some(8));
        assert_eq!(atomic_number("Xx"), None);
        assert_eq!(atomic_number("0"), None);
        assert_eq!(atomic_number("37"), None);
        assert_eq!(symbol(18), "Ar");
        assert_eq!(symbol(0), "?");
        assert_eq!(core_orbitals(1), 0);
        assert_eq!(core_orbitals(8), 1);
        assert_eq!(core_orbitals(17), 5);
    }
}
