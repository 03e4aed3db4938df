" Vim syntax file
" Language: SIAL, the block language of the Super Instruction Architecture (sial)
" Files:    *.sial, *.sialx
" The keyword lists are those of grammar/sial.pest; tests/editors.rs checks that they stay so.

if exists("b:current_syntax")
  finish
endif

syn case ignore
" Identifiers may contain '.', so 'a.do' is a name, not the keyword 'do'.
syn iskeyword @,48-57,_,.

syn keyword sialControl sial endsial import proc endproc call return stop do in enddo pardo
syn keyword sialControl endpardo where exit cycle section endsection if else endif
syn keyword sialType aoindex moindex moaindex mobindex index laindex subindex of scalar int
syn keyword sialType static temp local distributed served predefined contiguous sparse special
syn keyword sialStatement allocate deallocate create delete destroy put get prepare request
syn keyword sialStatement prequest collective execute sip_barrier server_barrier print println
syn keyword sialStatement print_index print_scalar print_int gpu_on gpu_off gpu_allocate
syn keyword sialStatement gpu_free gpu_put gpu_get set_persistent restore_persistent
syn keyword sialStatement assert_same broadcast_from sqrt

syn match sialNumber "\<\d\+\(\.\d*\)\=\([eE][+-]\=\d\+\)\=\>"
syn match sialNumber "\.\d\+\([eE][+-]\=\d\+\)\=\>"
syn match sialOperator "+=\|-=\|\*=\|<=\|>=\|==\|!=\|[-+*/^=<>:]"
syn region sialString start=+"+ end=+"+ oneline
syn match sialComment "#.*$" contains=@Spell

hi def link sialControl Statement
hi def link sialType Type
hi def link sialStatement Function
hi def link sialNumber Number
hi def link sialOperator Operator
hi def link sialString String
hi def link sialComment Comment

let b:current_syntax = "sial"
