function r = ppr(M, v, d)
  % personalised PageRank by 12 power-iteration steps
  % test inputs: M=stoch(7) v=dist(7) d=0.85
  r = v;
  for i = 1:12
    r = d * M * r + (1 - d) * v;
  end
end
