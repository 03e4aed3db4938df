//! The one-process launcher (`--workers 1 --servers 0`, SIAL-SPEC §7.16): worker 0 runs here,
//! linked to the one server it holds itself.

use super::{Figures, Ranks, Transport, add_servers};
use crate::cluster::message::ServerStats;
use crate::error::Result;
use crate::worker::Done;
use std::io::Write;

pub(super) struct Solo;

impl Transport for Solo {
    fn launch(
        &mut self,
        ranks: &Ranks<'_>,
        out: &mut (dyn Write + Send),
        done: &mut Done<'_>,
    ) -> Result<Option<Figures>> {
        let (saved, on_disk) = ranks.saved_at_start(0)?;
        let mut at_end = ranks.server_checkpoint(0, on_disk);
        let spill = ranks.options().spill(0);
        let mut link = crate::cluster::solo::Solo::new(
            ranks.todo,
            ranks.inputs.setup,
            saved,
            spill,
            &mut at_end,
        );
        let (worker, servers) = ranks.work(&mut link, out, done)?;
        let mut figures = Figures {
            workers: vec![worker],
            servers: vec![ServerStats::default()],
        };
        add_servers(&mut figures.servers, &servers);
        Ok(Some(figures))
    }
}
