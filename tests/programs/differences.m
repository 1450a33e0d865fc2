function d2 = differences(v)
  % second differences of a vector
  % test inputs: v=randn(10,1)
  d1 = v(2:end) - v(1:end-1);
  d2 = d1(2:end) - d1(1:end-1);
end
