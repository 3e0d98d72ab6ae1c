//go:build !purego

#include "textflag.h"

// Source lists are Go [][]byte: 24-byte slice headers whose first word is
// the data pointer. A nil pointer, or the index skip/skipA/skipB, means the
// source is left out (a zero block). n is a positive multiple of the
// kernel's block (128 bytes AVX2, 256 bytes AVX-512). nt != 0 selects
// non-temporal stores (destinations aligned to the vector size, which the
// caller checks), followed by an SFENCE.

// func xorAVX2(dst *byte, srcs *[]byte, nsrc, skip int, extra *byte, n, nt int)
TEXT ·xorAVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ srcs+8(FP), SI
	MOVQ nsrc+16(FP), CX
	MOVQ skip+24(FP), R8
	MOVQ extra+32(FP), R9
	MOVQ n+40(FP), DX
	MOVQ nt+48(FP), R10
	XORQ R11, R11

xloop2:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	TESTQ R9, R9
	JZ    xsrcs2
	VPXOR (R9)(R11*1), Y0, Y0
	VPXOR 32(R9)(R11*1), Y1, Y1
	VPXOR 64(R9)(R11*1), Y2, Y2
	VPXOR 96(R9)(R11*1), Y3, Y3

xsrcs2:
	XORQ R12, R12
	MOVQ SI, R13

xnext2:
	CMPQ  R12, CX
	JAE   xstore2
	CMPQ  R12, R8
	JEQ   xskip2
	MOVQ  (R13), R14
	TESTQ R14, R14
	JZ    xskip2
	VPXOR (R14)(R11*1), Y0, Y0
	VPXOR 32(R14)(R11*1), Y1, Y1
	VPXOR 64(R14)(R11*1), Y2, Y2
	VPXOR 96(R14)(R11*1), Y3, Y3

xskip2:
	INCQ R12
	ADDQ $24, R13
	JMP  xnext2

xstore2:
	TESTQ   R10, R10
	JNZ     xstnt2
	VMOVDQU Y0, (DI)(R11*1)
	VMOVDQU Y1, 32(DI)(R11*1)
	VMOVDQU Y2, 64(DI)(R11*1)
	VMOVDQU Y3, 96(DI)(R11*1)
	JMP     xnext2b

xstnt2:
	VMOVNTDQ Y0, (DI)(R11*1)
	VMOVNTDQ Y1, 32(DI)(R11*1)
	VMOVNTDQ Y2, 64(DI)(R11*1)
	VMOVNTDQ Y3, 96(DI)(R11*1)

xnext2b:
	ADDQ    $128, R11
	CMPQ    R11, DX
	JB      xloop2
	TESTQ   R10, R10
	JZ      xdone2
	SFENCE

xdone2:
	VZEROUPPER
	RET

// func xorAVX512(dst *byte, srcs *[]byte, nsrc, skip int, extra *byte, n, nt int)
TEXT ·xorAVX512(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ srcs+8(FP), SI
	MOVQ nsrc+16(FP), CX
	MOVQ skip+24(FP), R8
	MOVQ extra+32(FP), R9
	MOVQ n+40(FP), DX
	MOVQ nt+48(FP), R10
	XORQ R11, R11

xloop5:
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	TESTQ  R9, R9
	JZ     xsrcs5
	VPXORQ (R9)(R11*1), Z0, Z0
	VPXORQ 64(R9)(R11*1), Z1, Z1
	VPXORQ 128(R9)(R11*1), Z2, Z2
	VPXORQ 192(R9)(R11*1), Z3, Z3

xsrcs5:
	XORQ R12, R12
	MOVQ SI, R13

xnext5:
	CMPQ   R12, CX
	JAE    xstore5
	CMPQ   R12, R8
	JEQ    xskip5
	MOVQ   (R13), R14
	TESTQ  R14, R14
	JZ     xskip5
	VPXORQ (R14)(R11*1), Z0, Z0
	VPXORQ 64(R14)(R11*1), Z1, Z1
	VPXORQ 128(R14)(R11*1), Z2, Z2
	VPXORQ 192(R14)(R11*1), Z3, Z3

xskip5:
	INCQ R12
	ADDQ $24, R13
	JMP  xnext5

xstore5:
	TESTQ     R10, R10
	JNZ       xstnt5
	VMOVDQU64 Z0, (DI)(R11*1)
	VMOVDQU64 Z1, 64(DI)(R11*1)
	VMOVDQU64 Z2, 128(DI)(R11*1)
	VMOVDQU64 Z3, 192(DI)(R11*1)
	JMP       xnext5b

xstnt5:
	VMOVNTDQ Z0, (DI)(R11*1)
	VMOVNTDQ Z1, 64(DI)(R11*1)
	VMOVNTDQ Z2, 128(DI)(R11*1)
	VMOVNTDQ Z3, 192(DI)(R11*1)

xnext5b:
	ADDQ      $256, R11
	CMPQ      R11, DX
	JB        xloop5
	TESTQ     R10, R10
	JZ        xdone5
	SFENCE

xdone5:
	VZEROUPPER
	RET

// Horner's rule over 128-byte columns: P = D[top], Q = D[top]; then for
// z = top-1 .. 0: Q = {02}·Q; P ^= D[z]; Q ^= D[z]. Multiplication by
// {02} per byte: shift left, XOR 0x1d where the top bit was set.
//
// func genPQAVX2(p, q *byte, data *[]byte, top, skipA, skipB, n, nt int)
TEXT ·genPQAVX2(SB), NOSPLIT, $0-64
	MOVQ p+0(FP), AX
	MOVQ q+8(FP), BX
	MOVQ data+16(FP), SI
	MOVQ top+24(FP), CX
	MOVQ skipA+32(FP), R8
	MOVQ skipB+40(FP), R9
	MOVQ n+48(FP), DX
	MOVQ nt+56(FP), R12
	MOVQ $0x1d1d1d1d1d1d1d1d, R10
	MOVQ R10, X15
	VPBROADCASTQ X15, Y15
	VPXOR Y14, Y14, Y14
	IMUL3Q $24, CX, R10
	ADDQ SI, R10             // &data[top]
	XORQ R11, R11

gloop2:
	MOVQ    (R10), R13
	VMOVDQU (R13)(R11*1), Y0
	VMOVDQU 32(R13)(R11*1), Y1
	VMOVDQU 64(R13)(R11*1), Y2
	VMOVDQU 96(R13)(R11*1), Y3
	VMOVDQA Y0, Y4
	VMOVDQA Y1, Y5
	VMOVDQA Y2, Y6
	VMOVDQA Y3, Y7
	MOVQ    CX, R14
	MOVQ    R10, DI

ginner2:
	DECQ R14
	JS   gstore2
	SUBQ $24, DI
	VPCMPGTB Y4, Y14, Y8
	VPCMPGTB Y5, Y14, Y9
	VPCMPGTB Y6, Y14, Y10
	VPCMPGTB Y7, Y14, Y11
	VPADDB   Y4, Y4, Y4
	VPADDB   Y5, Y5, Y5
	VPADDB   Y6, Y6, Y6
	VPADDB   Y7, Y7, Y7
	VPAND    Y15, Y8, Y8
	VPAND    Y15, Y9, Y9
	VPAND    Y15, Y10, Y10
	VPAND    Y15, Y11, Y11
	VPXOR    Y8, Y4, Y4
	VPXOR    Y9, Y5, Y5
	VPXOR    Y10, Y6, Y6
	VPXOR    Y11, Y7, Y7
	CMPQ     R14, R8
	JEQ      ginner2
	CMPQ     R14, R9
	JEQ      ginner2
	MOVQ     (DI), R13
	TESTQ    R13, R13
	JZ       ginner2
	VMOVDQU  (R13)(R11*1), Y8
	VMOVDQU  32(R13)(R11*1), Y9
	VMOVDQU  64(R13)(R11*1), Y10
	VMOVDQU  96(R13)(R11*1), Y11
	VPXOR    Y8, Y0, Y0
	VPXOR    Y9, Y1, Y1
	VPXOR    Y10, Y2, Y2
	VPXOR    Y11, Y3, Y3
	VPXOR    Y8, Y4, Y4
	VPXOR    Y9, Y5, Y5
	VPXOR    Y10, Y6, Y6
	VPXOR    Y11, Y7, Y7
	JMP      ginner2

gstore2:
	TESTQ   R12, R12
	JNZ     gstnt2
	TESTQ   AX, AX
	JZ      gstoreq2
	VMOVDQU Y0, (AX)(R11*1)
	VMOVDQU Y1, 32(AX)(R11*1)
	VMOVDQU Y2, 64(AX)(R11*1)
	VMOVDQU Y3, 96(AX)(R11*1)

gstoreq2:
	VMOVDQU Y4, (BX)(R11*1)
	VMOVDQU Y5, 32(BX)(R11*1)
	VMOVDQU Y6, 64(BX)(R11*1)
	VMOVDQU Y7, 96(BX)(R11*1)
	JMP     gnext2

gstnt2:
	TESTQ    AX, AX
	JZ       gstntq2
	VMOVNTDQ Y0, (AX)(R11*1)
	VMOVNTDQ Y1, 32(AX)(R11*1)
	VMOVNTDQ Y2, 64(AX)(R11*1)
	VMOVNTDQ Y3, 96(AX)(R11*1)

gstntq2:
	VMOVNTDQ Y4, (BX)(R11*1)
	VMOVNTDQ Y5, 32(BX)(R11*1)
	VMOVNTDQ Y6, 64(BX)(R11*1)
	VMOVNTDQ Y7, 96(BX)(R11*1)

gnext2:
	ADDQ    $128, R11
	CMPQ    R11, DX
	JB      gloop2
	TESTQ   R12, R12
	JZ      gdone2
	SFENCE

gdone2:
	VZEROUPPER
	RET

// Same over 256-byte columns; {02}·Q is one GF2P8AFFINEQB with the bit
// matrix of multiplication by {02} modulo 0x11d.
//
// func genPQAVX512(p, q *byte, data *[]byte, top, skipA, skipB, n int, matrix uint64, nt int)
TEXT ·genPQAVX512(SB), NOSPLIT, $0-72
	MOVQ p+0(FP), AX
	MOVQ q+8(FP), BX
	MOVQ data+16(FP), SI
	MOVQ top+24(FP), CX
	MOVQ skipA+32(FP), R8
	MOVQ skipB+40(FP), R9
	MOVQ n+48(FP), DX
	VPBROADCASTQ matrix+56(FP), Z31
	MOVQ nt+64(FP), R12
	IMUL3Q $24, CX, R10
	ADDQ SI, R10
	XORQ R11, R11

gloop5:
	MOVQ      (R10), R13
	VMOVDQU64 (R13)(R11*1), Z0
	VMOVDQU64 64(R13)(R11*1), Z1
	VMOVDQU64 128(R13)(R11*1), Z2
	VMOVDQU64 192(R13)(R11*1), Z3
	VMOVDQA64 Z0, Z4
	VMOVDQA64 Z1, Z5
	VMOVDQA64 Z2, Z6
	VMOVDQA64 Z3, Z7
	MOVQ      CX, R14
	MOVQ      R10, DI

ginner5:
	DECQ           R14
	JS             gstore5
	SUBQ           $24, DI
	VGF2P8AFFINEQB $0, Z31, Z4, Z4
	VGF2P8AFFINEQB $0, Z31, Z5, Z5
	VGF2P8AFFINEQB $0, Z31, Z6, Z6
	VGF2P8AFFINEQB $0, Z31, Z7, Z7
	CMPQ           R14, R8
	JEQ            ginner5
	CMPQ           R14, R9
	JEQ            ginner5
	MOVQ           (DI), R13
	TESTQ          R13, R13
	JZ             ginner5
	VMOVDQU64      (R13)(R11*1), Z8
	VMOVDQU64      64(R13)(R11*1), Z9
	VMOVDQU64      128(R13)(R11*1), Z10
	VMOVDQU64      192(R13)(R11*1), Z11
	VPXORQ         Z8, Z0, Z0
	VPXORQ         Z9, Z1, Z1
	VPXORQ         Z10, Z2, Z2
	VPXORQ         Z11, Z3, Z3
	VPXORQ         Z8, Z4, Z4
	VPXORQ         Z9, Z5, Z5
	VPXORQ         Z10, Z6, Z6
	VPXORQ         Z11, Z7, Z7
	JMP            ginner5

gstore5:
	TESTQ     R12, R12
	JNZ       gstnt5
	TESTQ     AX, AX
	JZ        gstoreq5
	VMOVDQU64 Z0, (AX)(R11*1)
	VMOVDQU64 Z1, 64(AX)(R11*1)
	VMOVDQU64 Z2, 128(AX)(R11*1)
	VMOVDQU64 Z3, 192(AX)(R11*1)

gstoreq5:
	VMOVDQU64 Z4, (BX)(R11*1)
	VMOVDQU64 Z5, 64(BX)(R11*1)
	VMOVDQU64 Z6, 128(BX)(R11*1)
	VMOVDQU64 Z7, 192(BX)(R11*1)
	JMP       gnext5

gstnt5:
	TESTQ    AX, AX
	JZ       gstntq5
	VMOVNTDQ Z0, (AX)(R11*1)
	VMOVNTDQ Z1, 64(AX)(R11*1)
	VMOVNTDQ Z2, 128(AX)(R11*1)
	VMOVNTDQ Z3, 192(AX)(R11*1)

gstntq5:
	VMOVNTDQ Z4, (BX)(R11*1)
	VMOVNTDQ Z5, 64(BX)(R11*1)
	VMOVNTDQ Z6, 128(BX)(R11*1)
	VMOVNTDQ Z7, 192(BX)(R11*1)

gnext5:
	ADDQ      $256, R11
	CMPQ      R11, DX
	JB        gloop5
	TESTQ     R12, R12
	JZ        gdone5
	SFENCE

gdone5:
	VZEROUPPER
	RET
