function r = pagerank_uniform(M)
  % PageRank with uniform teleport, 10 steps
  % test inputs: M=stoch(6)
  n = rows(M);
  r = ones(n, 1) / n;
  for i = 1:10
    r = 0.85 * M * r + 0.15 / n;
  end
end
