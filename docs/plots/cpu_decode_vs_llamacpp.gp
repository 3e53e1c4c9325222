# CPU decode speed against context, kvforge and llama.cpp: gnuplot docs/plots/cpu_decode_vs_llamacpp.gp
# (from the repository root), reading docs/plots/cpu_decode_vs_llamacpp.dat.
set terminal pngcairo size 800,450 font 'sans,10' noenhanced
set output 'docs/plots/cpu_decode_vs_llamacpp.png'
set title 'CPU decode, llama-125m F16, 2 threads, f16 KV (compare-e2e.sh, 2026-11-30)'
set xlabel 'tokens already in the KV cache'
set ylabel 'decode tokens/s'
set grid
set key top right
set xrange [-900:17300]
set yrange [0:*]
set xtics (0, 4096, 8192, 12288, 16384)
plot 'docs/plots/cpu_decode_vs_llamacpp.dat' using 1:2 with linespoints lw 2 pt 7 title 'kvforge', \
     '' using 1:2:(sprintf('%.1f', $2)) with labels offset 0,1 notitle, \
     '' using 1:3 with linespoints lw 2 pt 5 title 'llama.cpp (llama-bench)', \
     '' using 1:3:(sprintf('%.1f', $3)) with labels offset 0,-1 notitle
