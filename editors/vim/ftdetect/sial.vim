" SIAL programs (sial): .sial and .sialx files.
autocmd BufNewFile,BufRead *.sial,*.sialx setfiletype sial
